//! A table of live objects reached by 64-bit generation-checked tokens, for handles the
//! host holds (WebSocket connections): (generation << 32) | (shard << 24) | index. A
//! token whose object is gone is recognised as such for a while (freed slots wait before
//! reuse); one whose slot was reused is "invalid". No integer the host passes can reach
//! freed memory.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

const SHARDS: usize = 16;
const INDEX_BITS: u32 = 24;
const REUSE_AFTER: usize = 1024;

pub(crate) enum Lookup {
    /// Was issued, and its object has ended.
    Gone,
    /// Never issued, or so old that its slot was reused.
    Invalid,
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

struct Shard<T> {
    slots: Vec<Slot<T>>,
    free: VecDeque<u32>,
}

pub(crate) struct Handles<T> {
    shards: Vec<Mutex<Shard<T>>>,
    next: AtomicUsize,
}

impl<T: Clone> Handles<T> {
    pub fn new() -> Handles<T> {
        Handles { shards: (0..SHARDS).map(|_| Mutex::new(Shard { slots: Vec::new(), free: VecDeque::new() })).collect(), next: AtomicUsize::new(0) }
    }

    fn split(id: u64) -> Option<(usize, usize, u32)> {
        let generation = (id >> 32) as u32;
        let shard = ((id >> INDEX_BITS) & 0xff) as usize;
        let index = (id & ((1 << INDEX_BITS) - 1)) as usize;
        (generation != 0 && shard < SHARDS).then_some((shard, index, generation))
    }

    /// Stores the object `make` builds from its own token.
    pub fn insert(&self, make: impl FnOnce(u64) -> T) -> u64 {
        let shard_no = self.next.fetch_add(1, Ordering::Relaxed) % SHARDS;
        let mut shard = self.shards[shard_no].lock();
        let index = if shard.free.len() > REUSE_AFTER || shard.slots.len() >= (1 << INDEX_BITS) {
            let index = shard.free.pop_front().expect("free queue is not empty");
            let slot = &mut shard.slots[index as usize];
            slot.generation = slot.generation.wrapping_add(1).max(1);
            index
        } else {
            shard.slots.push(Slot { generation: 1, value: None });
            (shard.slots.len() - 1) as u32
        };
        let generation = shard.slots[index as usize].generation;
        let id = (generation as u64) << 32 | (shard_no as u64) << INDEX_BITS | index as u64;
        shard.slots[index as usize].value = Some(make(id));
        id
    }

    pub fn get(&self, id: u64) -> Result<T, Lookup> {
        let (shard, index, generation) = Self::split(id).ok_or(Lookup::Invalid)?;
        let shard = self.shards[shard].lock();
        match shard.slots.get(index) {
            Some(slot) if slot.generation == generation => slot.value.clone().ok_or(Lookup::Gone),
            _ => Err(Lookup::Invalid),
        }
    }

    /// Ends the object; its token reads as "gone" until the slot is reused.
    pub fn remove(&self, id: u64) -> Option<T> {
        let (shard_no, index, generation) = Self::split(id)?;
        let mut shard = self.shards[shard_no].lock();
        let slot = shard.slots.get_mut(index).filter(|s| s.generation == generation)?;
        let value = slot.value.take();
        if value.is_some() {
            shard.free.push_back(index as u32);
        }
        value
    }

}

impl<T: Clone> Handles<T> {
    /// Every live object matching `keep`.
    pub fn collect(&self, keep: impl Fn(&T) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.lock().slots.iter().filter_map(|s| s.value.as_ref()).filter(|v| keep(v)).cloned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_find_their_object_then_read_as_gone_and_forged_ones_as_invalid() {
        let t: Handles<u64> = Handles::new();
        let a = t.insert(|id| id * 2);
        assert_eq!(t.get(a).ok(), Some(a * 2));
        assert_eq!(t.remove(a), Some(a * 2));
        assert!(matches!(t.get(a), Err(Lookup::Gone)));
        assert!(t.remove(a).is_none());
        for forged in [0u64, 1, u64::MAX, a ^ (1 << 32)] {
            assert!(matches!(t.get(forged), Err(Lookup::Invalid)), "{forged:#x}");
        }
    }
}
