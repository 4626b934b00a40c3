//! Calibration-cache text and timing-cache bytes through their parsers;
//! what parses must print and parse back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trtc::precision::calib::CalibrationCache;
use trtc::tuning::TimingCache;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cache) = CalibrationCache::parse(text) {
            let back = CalibrationCache::parse(&cache.to_text()).expect("a written calibration cache parses");
            assert_eq!(back.scales, cache.scales);
        }
    }
    if let Ok(cache) = TimingCache::from_bytes(data) {
        let back = TimingCache::from_bytes(&cache.to_bytes()).expect("a written timing cache parses");
        assert_eq!(back.len(), cache.len());
    }
});
