//! Named groups of WebSocket connections of one server, and broadcasts to them. Every
//! connection joins its route's pattern as a group when accepted.

use super::{Broadcast, WsConn};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

#[derive(Default)]
pub(crate) struct Hub {
    groups: Mutex<HashMap<String, HashMap<u64, Weak<WsConn>>>>,
}


impl Hub {
    pub fn join(&self, conn: &Arc<WsConn>, group: &str) {
        let fresh = self.groups.lock().entry(group.to_owned()).or_default().insert(conn.id, Arc::downgrade(conn)).is_none();
        if fresh {
            conn.groups.lock().push(group.to_owned());
        }
    }

    pub fn leave(&self, conn: &WsConn, group: &str) {
        let mut groups = self.groups.lock();
        if let Some(members) = groups.get_mut(group) {
            members.remove(&conn.id);
            if members.is_empty() {
                groups.remove(group);
            }
        }
        conn.groups.lock().retain(|g| g != group);
    }

    /// Leaves every group (the connection ended).
    pub fn remove(&self, conn: &WsConn) {
        let names = std::mem::take(&mut *conn.groups.lock());
        let mut groups = self.groups.lock();
        for name in names {
            if let Some(members) = groups.get_mut(&name) {
                members.remove(&conn.id);
                if members.is_empty() {
                    groups.remove(&name);
                }
            }
        }
    }

    /// Queues one encoded frame to every member; the buffer is shared, not copied.
    pub fn broadcast(&self, group: &str, frame: &Bytes, except: u64) -> Broadcast {
        let members: Vec<Arc<WsConn>> = match self.groups.lock().get(group) {
            Some(m) => m.iter().filter(|(id, _)| **id != except).filter_map(|(_, w)| w.upgrade()).collect(),
            None => return Broadcast::default(),
        };
        let mut done = Broadcast::default();
        for conn in members {
            match conn.send(frame.clone()) {
                Ok(()) => done.sent += 1,
                Err(_) => done.dropped += 1,
            }
        }
        done
    }

}
