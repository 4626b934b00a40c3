//! Team tactics: how the threads of a block share out the outputs of an
//! axis kernel (see `kernels/cuda/reduce_team.cuh`), and the sources and
//! candidates built from them.

use super::view::AxisView;
pub use crate::tactic::Team;
use crate::Tactic;
use crate::{Candidate, KernelLaunch, KernelSource, COMMON};

const TEAM_CUH: &str = include_str!("../../cuda/reduce_team.cuh");

/// Cap on the blocks of a launch; the kernels loop over the rest.
const MAX_BLOCKS: u64 = 65535 * 8;

/// Threads wanted in flight before a team grows past what its row needs
/// (enough to fill any GPU trtc targets).
const BUSY_THREADS: u64 = 1 << 16;

impl Team {
    pub const ROW_SIZES: [u32; 8] = [8, 16, 32, 64, 128, 256, 512, 1024];
    pub const COL_SIZES: [u32; 6] = [1, 2, 4, 8, 16, 32];

    pub fn block(self) -> [u32; 3] {
        match self {
            Team::Rows(s) => [s, self.teams(), 1],
            Team::Cols(s) => [32, s, 1],
        }
    }

    /// One team per output, up to the block cap.
    pub fn grid(self, nq: u64) -> [u32; 3] {
        [nq.div_ceil(self.teams() as u64).clamp(1, MAX_BLOCKS) as u32, 1, 1]
    }

    /// The heuristic team for `nq` outputs of `n` elements: a team that
    /// gives each thread about 8 elements (rows) or 16 (columns), grown
    /// while the launch has fewer than 64K threads and the team fewer
    /// threads than elements. Rows teams when the reduced elements are
    /// contiguous (or `rows_only`), columns otherwise.
    pub fn heuristic(nq: u64, n: u64, inner_reduced: bool) -> Team {
        let pow2 = |v: u64| v.max(1).next_power_of_two();
        if inner_reduced {
            let mut size = pow2(n.div_ceil(8)).clamp(8, 1024);
            while size < 1024 && size < n && nq * size < BUSY_THREADS {
                size *= 2;
            }
            Team::Rows(size as u32)
        } else {
            let mut size = pow2(n.div_ceil(16)).min(32);
            while size < 32 && size < n && nq * size < BUSY_THREADS {
                size *= 2;
            }
            Team::Cols(size as u32)
        }
    }

    /// Every team tactic, the heuristic one first; only rows teams when
    /// `rows_only`.
    pub fn all(view: &AxisView, rows_only: bool) -> Vec<Team> {
        let first = Team::heuristic(view.nq, view.n, view.inner_reduced || rows_only);
        let rows = Team::ROW_SIZES.iter().map(|&s| Team::Rows(s));
        let cols = Team::COL_SIZES.iter().map(|&s| Team::Cols(s)).filter(|_| !rows_only);
        std::iter::once(first).chain(rows.chain(cols).filter(|&t| t != first)).collect()
    }

    /// The defines of reduce_team.cuh for this team.
    fn defines(self, red2: bool) -> String {
        let (rows, size) = match self {
            Team::Rows(s) => (1, s),
            Team::Cols(s) => (0, s),
        };
        format!(
            "#define TEAM_ROWS {rows}\n#define TEAM_SIZE {size}\n#define TEAMS {}\n#define RED2 {}\n",
            self.teams(),
            u32::from(red2)
        )
    }

    /// A kernel source: the common helpers, `defines` (name, value), the
    /// team's defines and reduce_team.cuh, then `body`.
    pub fn source(self, entry: &str, body: &str, red2: bool, defines: &[(&str, String)]) -> KernelSource {
        let mut defs = String::new();
        for (k, v) in defines {
            defs.push_str(&format!("#define {k} {v}\n"));
        }
        KernelSource { entry: entry.into(), source: format!("{COMMON}\n{defs}{}\n{TEAM_CUH}\n{body}", self.defines(red2)) }
    }
}

/// One candidate per team tactic, the heuristic first: `family` names the
/// tactic (`<family> rows 128x2`), `launch` builds the launch of a team.
pub fn team_candidates(family: &str, view: &AxisView, rows_only: bool, launch: impl Fn(Team) -> KernelLaunch) -> Vec<Candidate> {
    Team::all(view, rows_only)
        .into_iter()
        .map(|t| Candidate { tactic: Tactic::Team { family: family.to_string(), team: t }, launches: vec![launch(t)] })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_teams() {
        // BERT-base LayerNorm rows: 128 threads of 6 elements.
        assert_eq!(Team::heuristic(4096, 768, true), Team::Rows(128));
        // One long row gets the biggest team.
        assert_eq!(Team::heuristic(1, 1 << 20, true), Team::Rows(1024));
        // A few short rows grow the team while there is work for it.
        assert_eq!(Team::heuristic(2, 40, true), Team::Rows(64));
        assert_eq!(Team::heuristic(1 << 20, 49, true), Team::Rows(8));
        assert_eq!(Team::heuristic(1 << 16, 64, false), Team::Cols(4));
        assert_eq!(Team::heuristic(3, 1000, false), Team::Cols(32));
        for t in Team::ROW_SIZES.iter().map(|&s| Team::Rows(s)).chain(Team::COL_SIZES.iter().map(|&s| Team::Cols(s))) {
            let threads: u32 = t.block().iter().product();
            assert!(threads <= 1024 && threads.is_multiple_of(32), "{t:?}");
        }
    }
}
