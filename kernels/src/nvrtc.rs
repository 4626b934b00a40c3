//! NVRTC, loaded at run time through cudarc. `trtc build` needs only
//! libnvrtc (from the CUDA toolkit or PyPI's `nvidia-cuda-nvrtc`), never a
//! GPU. cudarc dlopens bare library names and panics when none loads, so
//! trtc first finds the library itself and preloads it by absolute path;
//! when it cannot, the error says where it looked.

use anyhow::{anyhow, bail, Result};
use cudarc::nvrtc::sys;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where libnvrtc is looked for, in order: `TRTC_NVRTC_PATH` (a file or a
/// directory), pip's `nvidia/cu13/lib` under python's site-packages dirs and
/// the repository's `.cache/nvrtc`, then the CUDA toolkit's usual places.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(p) = std::env::var("TRTC_NVRTC_PATH") {
        let p = PathBuf::from(p);
        dirs.push(if p.is_file() { p.parent().map(Path::to_path_buf).unwrap_or_default() } else { p });
    }
    dirs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/nvrtc/nvidia/cu13/lib"));
    for base in ["/usr/local/lib", "/usr/lib", "/root/.local/lib"] {
        if let Ok(rd) = std::fs::read_dir(base) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.starts_with("python3") {
                    dirs.push(e.path().join("site-packages/nvidia/cu13/lib"));
                    dirs.push(e.path().join("dist-packages/nvidia/cu13/lib"));
                }
            }
        }
    }
    for cuda in ["/usr/local/cuda", "/usr/local/cuda-13.0"] {
        dirs.push(PathBuf::from(cuda).join("targets/x86_64-linux/lib"));
        dirs.push(PathBuf::from(cuda).join("lib64"));
    }
    dirs
}

static LOADED: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// Makes libnvrtc loadable by cudarc, once per process.
fn ensure_loaded() -> Result<()> {
    let r = LOADED.get_or_init(|| {
        for dir in search_dirs() {
            let lib = dir.join("libnvrtc.so.13");
            if lib.is_file() {
                // Preload the builtins too: NVRTC dlopens them by bare name.
                {
                    let extra = "libnvrtc-builtins.so.13.0";
                    let p = dir.join(extra);
                    if p.is_file() {
                        // SAFETY: loading a shared library runs its
                        // initializers; these are NVIDIA's NVRTC libraries.
                        if let Ok(l) = unsafe { libloading::Library::new(&p) } {
                            std::mem::forget(l);
                        }
                    }
                }
                // SAFETY: as above. Kept loaded for the process's lifetime,
                // so cudarc's dlopen of the bare soname finds it.
                match unsafe { libloading::Library::new(&lib) } {
                    Ok(l) => {
                        std::mem::forget(l);
                        return Ok(lib);
                    }
                    Err(e) => return Err(format!("{} did not load: {e}", lib.display())),
                }
            }
        }
        // Maybe it is on the loader's path already.
        // SAFETY: cudarc's own probe; it only tries to dlopen.
        if unsafe { sys::is_culib_present() } {
            return Ok(PathBuf::from("libnvrtc (from the loader's search path)"));
        }
        Err(format!(
            "libnvrtc.so.13 not found; install it with `pip install nvidia-cuda-nvrtc==13.0.88` or point TRTC_NVRTC_PATH at it (looked in {})",
            search_dirs().iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        ))
    });
    match r {
        Ok(_) => {
            // SAFETY: only probes with dlopen.
            if unsafe { sys::is_culib_present() } {
                Ok(())
            } else {
                bail!("libnvrtc was preloaded but cudarc cannot open it")
            }
        }
        Err(e) => Err(anyhow!("{e}")),
    }
}

/// Whether NVRTC can be used on this machine.
pub fn available() -> bool {
    ensure_loaded().is_ok()
}

/// Where the loaded libnvrtc came from.
pub fn library() -> Result<PathBuf> {
    ensure_loaded()?;
    LOADED.get().and_then(|r| r.as_ref().ok().cloned()).ok_or_else(|| anyhow!("libnvrtc not loaded"))
}

/// NVRTC's version, e.g. (13, 0).
pub fn version() -> Result<(i32, i32)> {
    ensure_loaded()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is loaded; the pointers are valid for the call.
    check(unsafe { sys::nvrtcVersion(&mut major, &mut minor) }, "nvrtcVersion")?;
    Ok((major, minor))
}

fn check(r: sys::nvrtcResult, what: &str) -> Result<()> {
    if r == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        bail!("{what} failed: {r:?}")
    }
}

/// A compiled kernel: the cubin for one SM and the compiler's log.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    pub log: String,
}

impl Compiled {
    /// Bytes of register spill stores ptxas reported (0 when none).
    pub fn spill_store_bytes(&self) -> u64 {
        self.log
            .lines()
            .filter_map(|l| l.split("bytes spill stores").next().filter(|_| l.contains("bytes spill stores")))
            .filter_map(|head| head.split_whitespace().last().and_then(|n| n.parse::<u64>().ok()))
            .sum()
    }
}

/// Cubins already compiled in this process, by (SM, source): a build, or a
/// test building many models, compiles each distinct source once.
static COMPILED: OnceLock<std::sync::Mutex<std::collections::HashMap<(u32, String), Compiled>>> = OnceLock::new();

/// Compiles CUDA C source to a cubin for `sm_<sm>` (e.g. 90). Errors carry
/// NVRTC's log. Sources compiled before in this process are not compiled
/// again.
pub fn compile(source: &str, name: &str, sm: u32) -> Result<Compiled> {
    let memo = COMPILED.get_or_init(Default::default);
    let key = (sm, source.to_string());
    if let Some(c) = memo.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(c.clone());
    }
    let c = compile_uncached(source, name, sm)?;
    // For the emulated CUDA driver: the module's emulator program, found
    // later by its cubin (`crate::emu`).
    if let Some(dir) = std::env::var_os(crate::emu::MODULES_ENV) {
        crate::emu::write_module(std::path::Path::new(&dir), &c.cubin, source)
            .map_err(|e| anyhow!("cannot write the emulator program of {name} into {}: {e}", crate::emu::MODULES_ENV))?;
    }
    memo.lock().unwrap_or_else(|p| p.into_inner()).insert(key, c.clone());
    Ok(c)
}

fn compile_uncached(source: &str, name: &str, sm: u32) -> Result<Compiled> {
    ensure_loaded()?;
    let src = CString::new(source).map_err(|_| anyhow!("kernel source contains a NUL byte"))?;
    let cname = CString::new(name).map_err(|_| anyhow!("kernel name contains a NUL byte"))?;
    // `--ptxas-options=-v` puts register use and spills in the log.
    let opts: Vec<CString> = [format!("--gpu-architecture=sm_{sm}"), "--std=c++17".into(), "--ptxas-options=-v".into()]
        .into_iter()
        .map(|o| CString::new(o).expect("option"))
        .collect();
    let opt_ptrs: Vec<*const std::ffi::c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the calls below; the program is
    // destroyed before returning.
    unsafe {
        check(
            sys::nvrtcCreateProgram(&mut prog, src.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null()),
            "nvrtcCreateProgram",
        )?;
        let compiled = sys::nvrtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_ptr());
        let mut log_size = 0usize;
        sys::nvrtcGetProgramLogSize(prog, &mut log_size);
        let mut log = vec![0u8; log_size.max(1)];
        sys::nvrtcGetProgramLog(prog, log.as_mut_ptr() as *mut std::ffi::c_char);
        let log = CStr::from_bytes_until_nul(&log).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        if compiled != sys::nvrtcResult::NVRTC_SUCCESS {
            sys::nvrtcDestroyProgram(&mut prog);
            bail!("NVRTC could not compile {name} for sm_{sm}: {compiled:?}\n{log}");
        }
        let mut size = 0usize;
        let r = sys::nvrtcGetCUBINSize(prog, &mut size);
        if r != sys::nvrtcResult::NVRTC_SUCCESS {
            sys::nvrtcDestroyProgram(&mut prog);
            bail!("nvrtcGetCUBINSize failed: {r:?}");
        }
        let mut cubin = vec![0u8; size];
        let r = sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut std::ffi::c_char);
        sys::nvrtcDestroyProgram(&mut prog);
        check(r, "nvrtcGetCUBIN")?;
        Ok(Compiled { cubin, log })
    }
}
