//! The tally's samples as a recording holds them: every
//! map as a list of entries (a recording is JSON, whose maps are keyed by
//! strings only), sorted so that one tally always writes the same bytes.
//! The stacks themselves are not here: a recording keeps them named
//! (`recording::Named`), by the same `StackId`s.

use serde::{Deserialize, Serialize};

use crate::collect::events::CpuSample;
use crate::model::{FrameLoc, LockKey};
use crate::tally::{
    CpuUnkept, LockTally, OffCpuKey, PollTally, SampleTally, SleepKey, SleepTally, StackId,
};

/// A map's entries, in a stable order.
type Entries<K, V> = Vec<(K, V)>;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Samples {
    pub sites: Entries<(u32, StackId), (u64, u64)>,
    pub locks: Entries<(LockKey, bool, StackId), LockTally>,
    pub offcpu: Entries<(OffCpuKey, StackId), (u64, u64)>,
    pub sleeps: Entries<(SleepKey, StackId), SleepTally>,
    pub wakes: Entries<(u32, u32, u8, StackId), (u64, u64)>,
    pub polls: Entries<(u32, u32, StackId), PollTally>,
    pub cpu: Entries<(u32, CpuSample, StackId), u64>,
    pub cpu_unkept: CpuUnkept,
    pub paths: Entries<u32, Entries<String, u64>>,
    pub code: Entries<FrameLoc, Vec<u8>>,
    pub count: u64,
    pub start_mono_ns: u64,
}

use super::entries::sorted;

impl Samples {
    /// The tally's samples, taken from it (its stacks are left behind).
    pub fn of(t: SampleTally) -> Samples {
        Samples {
            sites: sorted(t.sites),
            locks: sorted(t.locks),
            offcpu: sorted(t.offcpu),
            sleeps: sorted(t.sleeps),
            wakes: sorted(t.wakes),
            polls: sorted(t.polls),
            cpu: sorted(t.cpu),
            cpu_unkept: t.cpu_unkept,
            paths: sorted(t.paths)
                .into_iter()
                .map(|(nr, named)| (nr, sorted(named)))
                .collect(),
            code: sorted(t.code),
            count: t.count,
            start_mono_ns: t.start_mono_ns,
        }
    }

    /// The tally these samples came from, without its stacks (the analysis
    /// reads them named).
    pub fn to_tally(&self) -> SampleTally {
        SampleTally {
            sites: self.sites.iter().cloned().collect(),
            locks: self.locks.iter().cloned().collect(),
            offcpu: self.offcpu.iter().cloned().collect(),
            sleeps: self.sleeps.iter().cloned().collect(),
            wakes: self.wakes.iter().cloned().collect(),
            polls: self.polls.iter().cloned().collect(),
            cpu: self.cpu.iter().cloned().collect(),
            cpu_unkept: self.cpu_unkept,
            paths: self
                .paths
                .iter()
                .map(|(nr, named)| (*nr, named.iter().cloned().collect()))
                .collect(),
            code: self.code.iter().cloned().collect(),
            count: self.count,
            start_mono_ns: self.start_mono_ns,
            ..SampleTally::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::events::StackSample;
    use crate::model::UnwoundStack;
    use crate::stacks::unwind::Unwound;

    /// A tally written as samples and read back holds every count it held,
    /// and writes the same bytes again.
    #[test]
    fn samples_read_back_are_the_tally_they_were() {
        let mut t = SampleTally::default();
        let mut unwound = Vec::new();
        for (i, ip) in [0x1000u64, 0x2000, 0x1000].into_iter().enumerate() {
            let mut s = StackSample::at(ip, 0x7fff_0000);
            s.pid = 7;
            s.tid = 7 + i as u32;
            let frames = vec![FrameLoc::InModule {
                module: 0,
                svma: ip,
            }];
            unwound.push(Unwound {
                sample: s,
                stack: UnwoundStack {
                    frames,
                    truncated: false,
                },
            });
        }
        t.add(unwound);
        let cpu = t.cpu.clone();
        let json = serde_json::to_string(&Samples::of(t)).unwrap();
        let back: Samples = serde_json::from_str(&json).unwrap();
        let again = back.to_tally();
        assert_eq!(again.count, 3);
        assert_eq!(again.cpu, cpu);
        assert_eq!(serde_json::to_string(&Samples::of(again)).unwrap(), json);
    }
}
