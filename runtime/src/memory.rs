//! The memory planner: assigns every activation an arena offset so that
//! tensors whose live ranges overlap never share bytes.
//!
//! Greedy by size (largest first, each at the lowest offset that does not
//! collide with an already placed tensor of overlapping lifetime): simple and
//! within a few percent of optimal on CNNs and transformers.

/// One tensor to place: its size in bytes and its live range in steps
/// (inclusive).
#[derive(Clone, Copy, Debug)]
pub struct Interval {
    pub bytes: u64,
    pub first: usize,
    pub last: usize,
}

/// The result: one offset per interval and the arena size.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub offsets: Vec<u64>,
    pub arena_bytes: u64,
}

fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// Places every interval with buffer reuse; offsets are multiples of `alignment`.
pub fn plan_with_reuse(intervals: &[Interval], alignment: u64) -> Assignment {
    let mut order: Vec<usize> = (0..intervals.len()).collect();
    // Largest first; ties by first use then index keep it deterministic.
    order.sort_by(|&a, &b| {
        intervals[b].bytes.cmp(&intervals[a].bytes).then(intervals[a].first.cmp(&intervals[b].first)).then(a.cmp(&b))
    });
    let mut offsets = vec![0u64; intervals.len()];
    let mut placed: Vec<usize> = Vec::new();
    let mut arena = 0u64;
    for &i in &order {
        let t = intervals[i];
        let size = align(t.bytes.max(1), alignment);
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|&&j| intervals[j].first <= t.last && t.first <= intervals[j].last)
            .map(|&j| (offsets[j], offsets[j] + align(intervals[j].bytes.max(1), alignment)))
            .collect();
        busy.sort();
        let mut candidate = 0u64;
        for (s, e) in busy {
            if candidate + size <= s {
                break;
            }
            candidate = candidate.max(e);
        }
        offsets[i] = candidate;
        arena = arena.max(candidate + size);
        placed.push(i);
    }
    Assignment { offsets, arena_bytes: arena }
}

/// Places every interval at its own offset (no reuse), for comparison.
pub fn plan_without_reuse(intervals: &[Interval], alignment: u64) -> Assignment {
    let mut offsets = Vec::with_capacity(intervals.len());
    let mut end = 0u64;
    for t in intervals {
        offsets.push(end);
        end += align(t.bytes.max(1), alignment);
    }
    Assignment { offsets, arena_bytes: end }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_lifetimes_share_memory_and_overlapping_do_not() {
        let iv = [
            Interval { bytes: 100, first: 0, last: 1 },
            Interval { bytes: 100, first: 1, last: 2 },
            Interval { bytes: 100, first: 2, last: 3 },
        ];
        let a = plan_with_reuse(&iv, 64);
        assert_eq!(a.arena_bytes, 256);
        assert_ne!(a.offsets[0], a.offsets[1]);
        assert_ne!(a.offsets[1], a.offsets[2]);
        assert_eq!(a.offsets[0], a.offsets[2]);
        assert_eq!(plan_without_reuse(&iv, 64).arena_bytes, 384);
    }
}
