//! Weights packed once per engine (onnxruntime's pre-packing): a layer
//! whose weights are engine constants asks for them in the layout its
//! kernel reads best, gets them packed on its first run, and finds them
//! packed on every later run, instead of reading them in place (or packing
//! them again) each time.
//!
//! The CPU executor runs its layers inside [`with_weights`], naming the
//! engine's weights section and the cache that belongs to it. An op asks
//! [`packed`] for an input's bytes in a layout it names: when those bytes
//! lie in the weights section (an engine constant, immutable while the
//! engine lives) it gets the packed copy, else `None` and reads the input
//! as it is — outside an engine's run (constant folding, ops evaluated on
//! their own) and for weights computed at run time. A packed layout only
//! changes where a kernel reads its operands, never the arithmetic, so
//! results are bit-identical either way.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A packed layout, as the op that reads it names it: a kind and the sizes
/// that determine it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Layout {
    pub kind: &'static str,
    pub dims: [usize; 4],
}

/// Sixteen floats on one cache line, the unit packed copies are allocated
/// in.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([f32; 16]);

/// One packed copy of a constant.
pub(crate) struct Packed {
    lines: Vec<Line>,
    len: usize,
}

impl Packed {
    pub fn as_slice(&self) -> &[f32] {
        // SAFETY: `lines` holds at least `len` floats.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.len) }
    }
}

/// The packed copies of one engine's constants, by (byte offset in the
/// weights section, byte length, layout). Shared by every context of the
/// engine.
#[derive(Default)]
pub struct PackedWeights {
    copies: Mutex<HashMap<(usize, usize, Layout), Arc<Packed>>>,
}

impl PackedWeights {
    pub fn new() -> PackedWeights {
        PackedWeights::default()
    }

    /// Bytes the packed copies take.
    pub fn bytes(&self) -> usize {
        let copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        copies.values().map(|p| p.lines.len() * std::mem::size_of::<Line>()).sum()
    }
}

impl std::fmt::Debug for PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedWeights({} bytes)", self.bytes())
    }
}

/// The weights section and its cache, while a run is inside [`with_weights`].
#[derive(Clone, Copy)]
struct Current {
    cache: *const PackedWeights,
    start: usize,
    len: usize,
}

thread_local! {
    static CURRENT: Cell<Option<Current>> = const { Cell::new(None) };
}

/// Runs `f` with `weights` (an engine's constants, which must not change
/// while the cache lives) and their cache installed on this thread.
pub fn with_weights<R>(cache: &PackedWeights, weights: &[u8], f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Current>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let current = Current { cache, start: weights.as_ptr() as usize, len: weights.len() };
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(current))));
    f()
}

/// The packed copy of `values` in `layout` (`len` floats that `pack`
/// writes from them), packed on first use; `None` when `values` are not an
/// engine constant of the run on this thread.
pub(crate) fn packed<T>(values: &[T], layout: Layout, len: usize, pack: impl FnOnce(&mut [f32])) -> Option<Arc<Packed>> {
    let current = CURRENT.with(|c| c.get())?;
    let bytes = std::mem::size_of_val(values);
    let at = (values.as_ptr() as usize).checked_sub(current.start)?;
    if bytes == 0 || at.checked_add(bytes)? > current.len {
        return None;
    }
    // SAFETY: `with_weights` borrows the cache for as long as `CURRENT`
    // names it (restored on the way out, unwinding included).
    let cache = unsafe { &*current.cache };
    let key = (at, bytes, layout);
    if let Some(p) = cache.copies.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Some(p.clone());
    }
    // Packed outside the lock: another context packing the same constant
    // meanwhile only wastes its copy.
    let mut lines = Vec::new();
    lines.try_reserve_exact(len.div_ceil(16)).ok()?;
    lines.resize(len.div_ceil(16), Line([0.0; 16]));
    let mut copy = Packed { lines, len };
    // SAFETY: `lines` holds at least `len` floats.
    pack(unsafe { std::slice::from_raw_parts_mut(copy.lines.as_mut_ptr().cast::<f32>(), len) });
    copy.lines.shrink_to_fit();
    let mut copies = cache.copies.lock().unwrap_or_else(|e| e.into_inner());
    Some(copies.entry(key).or_insert_with(|| Arc::new(copy)).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout { kind: "test", dims: [2, 0, 0, 0] }
    }

    #[test]
    fn packs_constants_once_and_nothing_else() {
        let weights: Vec<u8> = (0..64).collect();
        let cache = PackedWeights::new();
        let packs = Cell::new(0);
        let pack = |out: &mut [f32]| {
            packs.set(packs.get() + 1);
            out.fill(7.0);
        };
        // Outside a run: nothing is a constant.
        assert!(packed(&weights[8..16], layout(), 2, pack).is_none());
        with_weights(&cache, &weights, || {
            let first = packed(&weights[8..16], layout(), 2, pack).expect("a constant");
            assert_eq!(first.as_slice(), [7.0, 7.0]);
            let again = packed(&weights[8..16], layout(), 2, |_| panic!("packed twice"));
            assert!(Arc::ptr_eq(&first, &again.expect("cached")));
            // Another range of the section, or another layout: another copy.
            assert!(packed(&weights[8..12], layout(), 2, pack).is_some());
            assert!(packed(&weights[8..16], Layout { kind: "other", dims: [2, 0, 0, 0] }, 2, pack).is_some());
            // Bytes outside the section are not constants.
            let other = weights.clone();
            assert!(packed(&other[8..16], layout(), 2, pack).is_none());
            assert!(packed(&weights[60..64], layout(), 2, pack).is_some());
        });
        assert_eq!(packs.get(), 4);
        assert!(packed(&weights[8..16], layout(), 2, pack).is_none(), "uninstalled after the run");
    }
}
