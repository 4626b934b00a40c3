//! Bytes as an npz archive and as a single npy array, read within a 16 MiB
//! budget (a bomb must be refused from its header, not inflated).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trtc::npz::{read_npy, Budget, Npz};

fuzz_target!(|data: &[u8]| {
    let _ = read_npy(&mut &data[..], "fuzz", &mut Budget::bytes(16 << 20));
    if let Ok(mut npz) = Npz::from_reader(std::io::Cursor::new(data), "fuzz.npz") {
        let _ = npz.read_all(&mut Budget::bytes(16 << 20));
    }
});
