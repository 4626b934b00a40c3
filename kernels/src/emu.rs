//! What the CUDA-on-CPU emulator (`kernels/emu/`) compiles: a kernel
//! source rewritten for the host C++ compiler, and, for the emulated CUDA
//! driver (`kernels/emu/libcuda.cpp`), one self-contained translation unit
//! per module.
//!
//! The emulated driver lets the CUDA executor itself run on a machine
//! without a GPU: a build with [`MODULES_ENV`] set writes, next to every
//! cubin NVRTC compiles, the emulator program of its source, named by
//! [`cubin_key`]; the driver, given the same directory, finds a module's
//! program from the cubin the executor loads, compiles it with g++ and
//! runs its launches on the CPU.

use std::path::Path;

/// The directory where compiled modules' emulator programs are written
/// (by NVRTC compilation) and read (by the emulated driver).
pub const MODULES_ENV: &str = "TRTC_EMU_MODULES";

/// The emulator's headers, which each module's program embeds.
const SHIM: &str = include_str!("../emu/shim.h");
const DRIVER: &str = include_str!("../emu/driver.h");

/// Where the emulator's sources are.
pub fn emu_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("emu")
}

/// g++ flags. UBSan reports misaligned accesses (which fault on the GPU),
/// out-of-bounds subscripts of arrays of known size (shared tiles, local
/// arrays) and shifts by the bit width or more, and stops the program.
pub const CXX_FLAGS: [&str; 9] = [
    "-std=c++20",
    "-O1",
    "-pthread",
    "-w",
    "-fno-strict-aliasing",
    "-fwrapv",
    "-ffp-contract=off",
    "-fsanitize=alignment,bounds,shift",
    "-fno-sanitize-recover=all",
];

/// Whether `line` has an inline asm statement.
fn has_asm(line: &str) -> bool {
    let l = line.trim_start();
    !l.starts_with("//") && (line.contains("asm(") || line.contains("asm volatile") || line.contains("asm ("))
}

/// The first asm statement that is compiled when TRTC_EMULATE is defined
/// (outside the `#else` of an `#ifdef TRTC_EMULATE` or an `#ifndef
/// TRTC_EMULATE`), if any.
fn unguarded_asm(source: &str) -> Option<String> {
    // Per open conditional: whether its current branch is excluded when
    // TRTC_EMULATE is defined; None for conditionals on anything else.
    let mut stack: Vec<Option<bool>> = Vec::new();
    for line in source.lines() {
        let t = line.trim_start();
        if let Some(d) = t.strip_prefix('#') {
            let d = d.trim_start();
            let word = d.split_whitespace().next().unwrap_or("");
            let rest = d[word.len()..].trim();
            match word {
                "ifdef" => stack.push((rest == "TRTC_EMULATE").then_some(false)),
                "ifndef" => stack.push((rest == "TRTC_EMULATE").then_some(true)),
                "if" => stack.push(match rest {
                    "defined(TRTC_EMULATE)" => Some(false),
                    "!defined(TRTC_EMULATE)" => Some(true),
                    _ => None,
                }),
                "else" | "elif" => {
                    if let Some(Some(x)) = stack.last_mut() {
                        *x = !*x;
                    }
                }
                "endif" => {
                    stack.pop();
                }
                _ => {}
            }
            continue;
        }
        if has_asm(line) && !stack.contains(&Some(true)) {
            return Some(line.trim().to_string());
        }
    }
    None
}

/// The source as the emulator compiles it: `extern "C"` dropped (each module
/// lives in its own namespace) and `extern __shared__` arrays turned into
/// pointers to the emulator's dynamic shared memory.
pub fn rewrite(source: &str) -> Result<String, String> {
    if let Some(line) = unguarded_asm(source) {
        return Err(format!("inline PTX without a TRTC_EMULATE branch: `{line}`"));
    }
    let mut out = String::new();
    for line in source.lines() {
        let mut l = line.replace("extern \"C\" ", "");
        if let Some(pos) = l.find("extern __shared__") {
            // extern __shared__ [__align__(n)] TYPE NAME[];
            let decl = l[pos + "extern __shared__".len()..].trim().trim_end_matches(';').trim().to_string();
            let decl = match decl.strip_prefix("__align__(") {
                Some(r) => r[r.find(')').unwrap() + 1..].trim().to_string(),
                None => decl,
            };
            let Some(decl) = decl.strip_suffix("[]") else {
                return Err(format!("cannot rewrite `{line}`"));
            };
            let split = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).ok_or(format!("cannot rewrite `{line}`"))?;
            let (ty, name) = (decl[..=split].trim(), &decl[split + 1..]);
            l = format!("{}{ty}* const {name} = ({ty}*)trtc_emu::dynamic_shared();", &l[..pos]);
        }
        out.push_str(&l);
        out.push('\n');
    }
    Ok(out)
}

/// Names the source #defines (undefined after its module).
pub fn defined_macros(source: &str) -> Vec<String> {
    let mut names: Vec<String> = source
        .lines()
        .filter_map(|l| {
            let d = l.trim_start().strip_prefix('#')?.trim_start().strip_prefix("define")?;
            let name: String = d.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The `__global__` functions of a source, in order: after each
/// `__global__`, the last identifier before the parameter list's `(`
/// (skipping `void`, `__launch_bounds__(...)` and macros such as
/// `TC_BOUNDS`).
pub fn entry_points(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in source.match_indices("__global__") {
        let rest = &source[at + "__global__".len()..];
        let mut chars = rest.char_indices().peekable();
        let mut last = None;
        while let Some((i, c)) = chars.next() {
            if c.is_alphabetic() || c == '_' {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if !(d.is_alphanumeric() || d == '_') {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                last = Some(&rest[i..end]);
            } else if c == '(' {
                if last != Some("__launch_bounds__") {
                    break;
                }
                // Skip the bounds' balanced parentheses.
                let mut depth = 1;
                for (_, d) in chars.by_ref() {
                    depth += match d {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    if depth == 0 {
                        break;
                    }
                }
                last = None;
            } else if !c.is_whitespace() {
                last = None;
                break;
            }
        }
        if let Some(name) = last.filter(|n| *n != "void") {
            names.push(name.to_string());
        }
    }
    names
}

/// FNV-1a of a cubin's bytes: the name under which its module's program is
/// found (the emulated driver computes it from the ELF image it is given).
pub fn cubin_key(cubin: &[u8]) -> u64 {
    cubin.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// One module as a translation unit of its own for the emulated driver:
/// the shim, the rewritten source in a namespace, a table of its entry
/// points taking the driver's raw parameter pointers, and the scheduler
/// in library mode. Its first line is `// g++ FLAGS`, the flags to compile
/// it with (plus `-shared -fPIC`).
pub fn library_program(source: &str) -> Result<String, String> {
    let code = rewrite(source)?;
    let entries = entry_points(source);
    if entries.is_empty() {
        return Err("no __global__ function".into());
    }
    let mut s = format!("// g++ {}\n#define TRTC_EMU_LIBRARY 1\n{SHIM}\n", CXX_FLAGS.join(" "));
    // Every name of the table exists: as the module's function, or (where
    // the preprocessor dropped it) as a `Missing` reached through the
    // using-directive, which qualified lookup only consults when the
    // namespace itself has no such name.
    s.push_str("namespace trtc_emu_module {\nnamespace trtc_emu_absent {\n");
    for e in &entries {
        s.push_str(&format!("constexpr trtc_emu::Missing {e}{{}};\n"));
    }
    s.push_str("}\nusing namespace trtc_emu_absent;\n}\n");
    s.push_str(&format!("namespace trtc_emu_module {{\n#line 1 \"module.cu\"\n{code}}}\n"));
    for name in defined_macros(&code) {
        s.push_str(&format!("#undef {name}\n"));
    }
    s.push_str("const trtc_emu::RawEntry trtc_emu_raw_entries[] = {\n");
    for e in &entries {
        s.push_str(&format!("    trtc_emu::raw_entry<trtc_emu_module::{e}>(\"{e}\"),\n"));
    }
    s.push_str(&format!("}};\nconst int trtc_emu_raw_entry_count = {};\n{DRIVER}", entries.len()));
    Ok(s)
}

/// Writes the emulator program of a freshly compiled module into `dir`
/// (`KEY.cpp`, or `KEY.skip` with the reason where it has none, such as
/// inline PTX without an emulated branch). Through a temporary file and a
/// rename, so that a driver in another process reading it meanwhile (tests
/// run several) sees the old text or the new one, never a part.
pub fn write_module(dir: &Path, cubin: &[u8], source: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let key = cubin_key(cubin);
    let (path, text) = match library_program(source) {
        Ok(text) => (dir.join(format!("{key:016x}.cpp")), text),
        Err(why) => (dir.join(format!("{key:016x}.skip")), why),
    };
    if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(());
    }
    let tmp = dir.join(format!("{key:016x}.tmp{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

/// Builds the emulated CUDA driver (`emu/libcuda.cpp`) with g++ into
/// `DIR/driver-DIGEST/libcuda.so.1` unless that exists (DIGEST that of the
/// source), and returns its path: what `TRTC_LIBCUDA` names for the CUDA
/// executor to run on it.
pub fn build_driver(dir: &Path) -> Result<std::path::PathBuf, String> {
    let src = emu_dir().join("libcuda.cpp");
    let text = std::fs::read(&src).map_err(|e| format!("cannot read {}: {e}", src.display()))?;
    let dir = dir.join(format!("driver-{:016x}", cubin_key(&text)));
    let lib = dir.join("libcuda.so.1");
    if lib.exists() {
        return Ok(lib);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!("libcuda.so.1.tmp{}", std::process::id()));
    let out = std::process::Command::new("g++")
        .args(["-std=c++20", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libcuda.so.1"])
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(|e| format!("cannot run g++: {e}"))?;
    if !out.status.success() {
        return Err(format!("g++ failed on {}:\n{}", src.display(), String::from_utf8_lossy(&out.stderr)));
    }
    std::fs::rename(&tmp, &lib).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))?;
    Ok(lib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_skip_launch_bounds() {
        let src = "extern \"C\" __global__ void __launch_bounds__(NT, (2 * 3)) trtc_a(float* y) {}\n\
                   extern \"C\" __global__ void trtc_b (int n) {}\n// __global__ mentioned\n\
                   extern \"C\" __global__ void TC_BOUNDS trtc_c(GEMM_PARAMS) {}\n";
        assert_eq!(entry_points(src), ["trtc_a", "trtc_b", "trtc_c"]);
    }
}
