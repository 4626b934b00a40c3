//! Opening the files a user names, safely: every path trtc reads (models,
//! engines, npz/npy data, caches) or writes (engines, outputs, caches) goes
//! through here.
//!
//! Reading a FIFO blocks until a writer appears, and a character device can
//! stream forever, so only regular files are read: the file is opened with
//! `O_NONBLOCK` (which makes opening a FIFO return at once and changes
//! nothing for regular files), then its type is checked on the open handle,
//! so a file swapped between a check and the open cannot slip through.
//!
//! Writes go to a temporary file beside the target, renamed over it when
//! complete: a failed write (disk full, an error half-way) leaves no
//! truncated file behind, and readers never see a partial one. A target that
//! exists and is not a regular file (a FIFO, a device, a directory) is
//! refused rather than replaced.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// An error about a named file, printed as `PATH: what went wrong`.
/// The I/O error is part of the message, not a separate cause, so that a
/// chain of causes prints it once.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {error}")]
pub struct FileError {
    pub path: String,
    pub error: io::Error,
}

fn err(path: &Path, error: io::Error) -> FileError {
    FileError { path: path.display().to_string(), error }
}

fn not_regular(path: &Path, kind: &str) -> FileError {
    err(path, io::Error::new(io::ErrorKind::InvalidInput, format!("is {kind}, not a regular file")))
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

/// Opens a regular file for reading; anything else is an error that says
/// what the path is.
pub fn open(path: &Path) -> Result<File, FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| err(path, e))?;
    let meta = file.metadata().map_err(|e| err(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, kind_of(meta.file_type())));
    }
    Ok(file)
}

/// Reads a whole regular file, at most `limit` bytes (a larger file is an
/// error, read no further).
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let file = open(path)?;
    let len = file.metadata().map_err(|e| err(path, e))?.len();
    if len > limit {
        return Err(err(
            path,
            io::Error::new(io::ErrorKind::InvalidData, format!("is {len} bytes, more than the {limit} allowed")),
        ));
    }
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len as usize).map_err(|_| err(path, io::Error::from(io::ErrorKind::OutOfMemory)))?;
    // The file may grow while it is read: never past the limit.
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| err(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(err(
            path,
            io::Error::new(io::ErrorKind::InvalidData, format!("grew past the {limit} bytes allowed while being read")),
        ));
    }
    Ok(bytes)
}

/// Reads a whole regular file.
pub fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    read_limited(path, u64::MAX)
}

/// Reads a whole regular file as UTF-8 text.
pub fn read_to_string(path: &Path) -> Result<String, FileError> {
    String::from_utf8(read(path)?).map_err(|_| err(path, io::Error::new(io::ErrorKind::InvalidData, "is not UTF-8 text")))
}

/// Whether `path` names a regular file (following symbolic links); for
/// callers that treat an absent file and an existing one differently.
pub fn is_regular(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Checks that `path` can be written by [`write`]: absent, or a regular
/// file (through symbolic links).
pub fn check_writable(path: &Path) -> Result<(), FileError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => Err(not_regular(path, kind_of(m.file_type()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err(path, e)),
    }
}

/// Writes `bytes` to `path` atomically (a temporary file renamed over it).
/// A symbolic link at `path` is replaced by the file, not written through.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    check_writable(path)?;
    let tmp = temporary_beside(path);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        // On disk before the rename, so a crash leaves the old file or the
        // new one, never an empty one.
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(path, e));
    }
    Ok(())
}

fn temporary_beside(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unique = format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    path.with_file_name(unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("trtc-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_round_trip() {
        let d = dir("round-trip");
        let p = d.join("a.bin");
        write(&p, b"hello").unwrap();
        write(&p, b"again").unwrap();
        assert_eq!(read(&p).unwrap(), b"again");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary file left behind");
        assert!(read_limited(&p, 4).unwrap_err().to_string().contains("more than the 4 allowed"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn directories_and_devices_are_refused() {
        let d = dir("special");
        let e = read(&d).unwrap_err().to_string();
        assert!(e.contains("is a directory, not a regular file"), "{e}");
        assert!(write(&d, b"x").unwrap_err().to_string().contains("is a directory"));
        #[cfg(unix)]
        {
            let e = read(Path::new("/dev/zero")).unwrap_err().to_string();
            assert!(e.contains("character device"), "{e}");
            assert!(write(Path::new("/dev/full"), b"x").unwrap_err().to_string().contains("character device"));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once() {
        let d = dir("fifo");
        let p = d.join("f");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open would block forever: no writer.
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        assert!(write(&p, b"x").unwrap_err().to_string().contains("FIFO"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
