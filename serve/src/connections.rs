//! The open connections, as budgets: at most `cap` in all and `per_peer_max` from one address,
//! and at the cap the connection idle the longest makes room for a new client.
//!
//! Without the bound per address one client could take every slot and leave everyone else in
//! the listen backlog: 2,000 idle sockets from one peer made a normal GET wait 8 s. Without
//! shedding, a cap full of idle connections (keep-alive clients that went quiet, or heads sent a
//! byte at a time) would do the same until the header timeout closed them. A connection is idle
//! while it has not sent a complete request head since its last answer: shedding one loses no
//! request, and a request that arrives meanwhile is still answered (see `Slot`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

/// The connection budget, shared by the accept loop and every connection.
pub struct Connections {
    cap: usize,
    per_peer_max: usize,
    /// Times for `Slot::idle_since`.
    epoch: Instant,
    /// A std mutex, not tokio's: it is held for a few map operations and never across an await.
    registry: Mutex<Registry>,
    /// Notified whenever a connection closes: the accept loop waits here at the cap, and the
    /// shutdown for the last one.
    freed: Notify,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    open: HashMap<u64, Arc<Slot>>,
    per_peer: HashMap<IpAddr, usize>,
}

/// One open connection, as the budget sees it.
pub struct Slot {
    peer: IpAddr,
    /// Set while a request whose head has arrived is being answered; such a connection is never
    /// chosen to be shed.
    busy: AtomicBool,
    /// When it last became idle (milliseconds since `epoch`).
    idle_since_ms: AtomicU64,
    epoch: Instant,
    /// Asks the connection to close: it then stops keeping alive, answers any request already
    /// started, and closes (hyper's graceful shutdown).
    pub shed: Notify,
}

/// Why a connection was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its address already has `per_peer_max` connections.
    PeerFull,
    /// All `cap` slots are taken.
    Full,
}

/// An admitted connection's hold on its slot, released when dropped.
pub struct Ticket {
    connections: Arc<Connections>,
    id: u64,
    peer: IpAddr,
    pub slot: Arc<Slot>,
}

impl Connections {
    pub fn new(cap: usize, per_peer_max: usize) -> Arc<Connections> {
        assert!(
            cap >= 1 && per_peer_max >= 1,
            "the CLI checks both are at least 1"
        );
        Arc::new(Connections {
            cap,
            per_peer_max,
            epoch: Instant::now(),
            registry: Mutex::new(Registry::default()),
            freed: Notify::new(),
        })
    }

    pub fn per_peer_max(&self) -> usize {
        self.per_peer_max
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        // Nothing panics while holding it; a poisoned lock still holds consistent maps.
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn open_count(&self) -> usize {
        self.registry().open.len()
    }

    /// Takes a slot for a connection from `peer`.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, Refusal> {
        let mut registry = self.registry();
        let from_peer = registry.per_peer.get(&peer).copied().unwrap_or(0);
        if from_peer >= self.per_peer_max {
            return Err(Refusal::PeerFull);
        }
        if registry.open.len() >= self.cap {
            return Err(Refusal::Full);
        }
        registry.next_id += 1;
        let id = registry.next_id;
        let slot = Arc::new(Slot {
            peer,
            busy: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            epoch: self.epoch,
            shed: Notify::new(),
        });
        registry.open.insert(id, slot.clone());
        *registry.per_peer.entry(peer).or_insert(0) += 1;
        Ok(Ticket {
            connections: self.clone(),
            id,
            peer,
            slot,
        })
    }

    /// Asks an idle connection to close: the one idle the longest of the address that has the
    /// most connections (under a flood, the flooder's, not a quiet client's keep-alive), else
    /// the one idle the longest; false if none is idle.
    pub fn shed_one(&self) -> bool {
        let registry = self.registry();
        let idle = || {
            registry
                .open
                .values()
                .filter(|slot| !slot.busy.load(Ordering::Acquire))
        };
        let greediest = registry.per_peer.iter().max_by_key(|(_, count)| **count);
        let oldest = greediest
            .and_then(|(peer, _)| {
                idle()
                    .filter(|slot| slot.peer == *peer)
                    .min_by_key(|slot| slot.idle_since_ms.load(Ordering::Relaxed))
            })
            .or_else(|| idle().min_by_key(|slot| slot.idle_since_ms.load(Ordering::Relaxed)));
        match oldest {
            Some(slot) => {
                // Stored, so that it is seen even if the connection is not waiting right now.
                slot.shed.notify_one();
                true
            }
            None => false,
        }
    }

    /// A future that completes at the next close; create it before checking the condition it
    /// waits for, so that a close in between is not missed.
    pub fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.freed.notified()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl Slot {
    /// Marks the connection busy until the guard is dropped (the answer is built, or the
    /// request abandoned).
    pub fn busy(self: &Arc<Slot>) -> BusyGuard {
        self.busy.store(true, Ordering::Release);
        BusyGuard(self.clone())
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }
}

pub struct BusyGuard(Arc<Slot>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let slot = &self.0;
        let now_ms = slot.epoch.elapsed().as_millis() as u64;
        slot.idle_since_ms.store(now_ms, Ordering::Relaxed);
        slot.busy.store(false, Ordering::Release);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut registry = self.connections.registry();
        registry.open.remove(&self.id);
        if let Some(count) = registry.per_peer.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                registry.per_peer.remove(&self.peer);
            }
        }
        drop(registry);
        self.connections.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn bounds_connections_per_peer_and_in_all() {
        let connections = Connections::new(3, 2);
        let a1 = connections.admit(address(1)).expect("first of a");
        let _a2 = connections.admit(address(1)).expect("second of a");
        assert_eq!(connections.admit(address(1)).err(), Some(Refusal::PeerFull));
        let _b1 = connections.admit(address(2)).expect("b");
        assert_eq!(connections.admit(address(3)).err(), Some(Refusal::Full));
        drop(a1);
        assert_eq!(connections.open_count(), 2);
        let _c1 = connections.admit(address(3)).expect("room again");
        assert_eq!(connections.admit(address(1)).err(), Some(Refusal::Full));
    }

    #[test]
    fn sheds_from_the_address_with_the_most_connections_first() {
        let connections = Connections::new(4, 4);
        let quiet = connections
            .admit(address(1))
            .expect("quiet, idle the longest");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let greedy: Vec<Ticket> = (0..3)
            .map(|_| connections.admit(address(2)).expect("greedy"))
            .collect();
        assert!(connections.shed_one());
        assert!(
            !notified(&quiet.slot.shed),
            "the quiet client keeps its connection"
        );
        let shed = greedy.iter().filter(|t| notified(&t.slot.shed)).count();
        assert_eq!(shed, 1, "one of the greedy address's connections is shed");
    }

    /// Whether a notification is stored (polls a new `notified` future once).
    fn notified(notify: &Notify) -> bool {
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let future = std::pin::pin!(notify.notified());
        std::future::Future::poll(future, &mut context).is_ready()
    }

    #[test]
    fn sheds_the_longest_idle_and_never_a_busy_one() {
        let connections = Connections::new(3, 3);
        let first = connections.admit(address(1)).expect("first");
        let second = connections.admit(address(1)).expect("second");
        let guard = first.slot.busy();
        assert!(connections.shed_one(), "the second is idle");
        // `notify_one` stores a permit: the second's shed future completes at once.
        assert!(notified(&second.slot.shed));
        drop(second);
        assert!(!connections.shed_one(), "the only one left is busy");
        drop(guard);
        assert!(connections.shed_one(), "idle again");
    }
}
