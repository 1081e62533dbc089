//! The conversation history: the messages of a session, shared rather than copied.
//!
//! A [`History`] reads like a slice of [`Message`]s (it derefs to `[Message]`) and
//! changes through a few `Vec`-like methods. Two things make a model call's cost
//! independent of how long the history is:
//!
//! - **Sharing.** The messages sit behind an `Arc`: cloning a history (to build a
//!   [`ModelRequest`](crate::base::model::ModelRequest), or a state snapshot to persist) copies
//!   a pointer. A change to a history that is still shared copies it first
//!   (copy-on-write), so a clone never sees later changes.
//! - **Identity.** Every message has an id ([`History::ids`]), unique in the process,
//!   given when the message enters a history and kept by clones, truncation and removal
//!   of other messages. Equal ids mean equal messages, so a model adapter can keep the
//!   wire encoding of a prefix of the history and reuse it for as long as the ids match,
//!   and a store can append only the messages it has not written yet.
//!
//! The token estimate of each message (4 bytes per token) is computed once, when the
//! message enters, and kept with a running total.

use std::ops::{Deref, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::model::Message;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The bytes of a message that count toward its token estimate.
pub(crate) fn message_chars(m: &Message) -> usize {
    match m {
        Message::User { text, .. } => text.len(),
        Message::Assistant { text, tool_calls } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.len(),
    }
}

#[derive(Debug, Clone, Default)]
struct Inner {
    messages: Vec<Message>,
    ids: Vec<u64>,
    chars: Vec<usize>,
    total_chars: usize,
}

/// The conversation, oldest first. See the [module documentation](self).
#[derive(Debug, Clone, Default)]
pub struct History {
    inner: Arc<Inner>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    /// The ids of the messages, in order (see the [module documentation](self)).
    pub fn ids(&self) -> &[u64] {
        &self.inner.ids
    }

    /// The messages.
    pub fn as_slice(&self) -> &[Message] {
        &self.inner.messages
    }

    /// Estimated tokens of the whole history (4 bytes per token), kept up to date as
    /// messages come and go.
    pub fn estimated_tokens(&self) -> u64 {
        (self.inner.total_chars / 4) as u64
    }

    /// Adds a message at the end.
    pub fn push(&mut self, message: Message) {
        let inner = self.inner_mut();
        let chars = message_chars(&message);
        inner.total_chars += chars;
        inner.chars.push(chars);
        inner.ids.push(fresh_id());
        inner.messages.push(message);
    }

    /// Inserts a message at `index` (at most the length); later messages keep their ids.
    pub fn insert(&mut self, index: usize, message: Message) {
        let index = index.min(self.len());
        let inner = self.inner_mut();
        let chars = message_chars(&message);
        inner.total_chars += chars;
        inner.chars.insert(index, chars);
        inner.ids.insert(index, fresh_id());
        inner.messages.insert(index, message);
    }

    /// Keeps the first `len` messages.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let inner = self.inner_mut();
        inner.messages.truncate(len);
        inner.ids.truncate(len);
        inner.chars.truncate(len);
        inner.total_chars = inner.chars.iter().sum();
    }

    /// Removes every message.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Removes the messages in `range` and returns them.
    pub fn drain<R: RangeBounds<usize> + Clone>(&mut self, range: R) -> Vec<Message> {
        let inner = self.inner_mut();
        inner.ids.drain(range.clone());
        inner.chars.drain(range.clone());
        let out: Vec<Message> = inner.messages.drain(range).collect();
        inner.total_chars = inner.chars.iter().sum();
        out
    }

    /// Replaces the message at `index` (it gets a new id); `false` when out of range.
    pub fn set(&mut self, index: usize, message: Message) -> bool {
        if index >= self.len() {
            return false;
        }
        let inner = self.inner_mut();
        let chars = message_chars(&message);
        inner.total_chars = inner.total_chars - inner.chars[index] + chars;
        inner.chars[index] = chars;
        inner.ids[index] = fresh_id();
        inner.messages[index] = message;
        true
    }

    /// The messages as a `Vec` (a copy).
    pub fn to_vec(&self) -> Vec<Message> {
        self.inner.messages.clone()
    }

    /// A history made of the messages `range` of this one, keeping their ids.
    pub fn slice<R: RangeBounds<usize> + Clone>(&self, range: R) -> History {
        let mut out = self.clone();
        let len = self.len();
        let start = match range.start_bound() {
            std::ops::Bound::Included(&s) => s,
            std::ops::Bound::Excluded(&s) => s + 1,
            std::ops::Bound::Unbounded => 0,
        }
        .min(len);
        let end = match range.end_bound() {
            std::ops::Bound::Included(&e) => e + 1,
            std::ops::Bound::Excluded(&e) => e,
            std::ops::Bound::Unbounded => len,
        }
        .clamp(start, len);
        out.truncate(end);
        if start > 0 {
            out.drain(..start);
        }
        out
    }
}

impl Deref for History {
    type Target = [Message];
    fn deref(&self) -> &[Message] {
        &self.inner.messages
    }
}

impl AsRef<[Message]> for History {
    fn as_ref(&self) -> &[Message] {
        &self.inner.messages
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.inner.messages.iter()
    }
}

impl Extend<Message> for History {
    fn extend<T: IntoIterator<Item = Message>>(&mut self, iter: T) {
        for m in iter {
            self.push(m);
        }
    }
}

impl FromIterator<Message> for History {
    fn from_iter<T: IntoIterator<Item = Message>>(iter: T) -> Self {
        let mut h = History::new();
        h.extend(iter);
        h
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        let chars: Vec<usize> = messages.iter().map(message_chars).collect();
        Self {
            inner: Arc::new(Inner {
                ids: messages.iter().map(|_| fresh_id()).collect(),
                total_chars: chars.iter().sum(),
                chars,
                messages,
            }),
        }
    }
}

impl From<History> for Vec<Message> {
    fn from(h: History) -> Self {
        match Arc::try_unwrap(h.inner) {
            Ok(inner) => inner.messages,
            Err(shared) => shared.messages.clone(),
        }
    }
}

/// Histories are equal when their messages are (ids are not compared).
impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.inner.messages == other.inner.messages
    }
}

impl PartialEq<Vec<Message>> for History {
    fn eq(&self, other: &Vec<Message>) -> bool {
        &self.inner.messages == other
    }
}

/// Serialised as the plain list of messages.
impl Serialize for History {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.inner.messages.serialize(s)
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(d).map(History::from)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn user(t: &str) -> Message {
        Message::User {
            text: t.into(),
            images: vec![],
        }
    }

    #[test]
    fn clones_share_and_copy_on_write() {
        let mut a = History::new();
        a.push(user("one"));
        a.push(user("two"));
        let b = a.clone();
        assert_eq!(a.ids(), b.ids());
        a.push(user("three"));
        assert_eq!(b.len(), 2);
        assert_eq!(&a.ids()[..2], b.ids());
        let mut c = b.clone();
        c.push(user("other"));
        assert_ne!(a.ids()[2], c.ids()[2], "divergent pushes get distinct ids");
    }

    #[test]
    fn edits_renew_only_what_they_change() {
        let mut a: History = vec![user("a"), user("bb"), user("cccc")].into();
        let before = a.ids().to_vec();
        assert_eq!(a.estimated_tokens(), 7 / 4);
        a.set(1, user("dddddddd"));
        assert_eq!(a.ids()[0], before[0]);
        assert_ne!(a.ids()[1], before[1]);
        assert_eq!(a.ids()[2], before[2]);
        assert_eq!(a.estimated_tokens(), 13 / 4);
        let drained = a.drain(..1);
        assert_eq!(drained, vec![user("a")]);
        assert_eq!(a.ids()[1], before[2]);
        a.insert(0, user("summary"));
        assert_eq!(a.ids()[2], before[2]);
        assert_eq!(a.estimated_tokens(), (7 + 8 + 4) / 4);
        a.truncate(1);
        assert_eq!(a.estimated_tokens(), 7 / 4);
        let s = a.slice(..);
        assert_eq!(s.ids(), a.ids());
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, serde_json::to_string(&a.to_vec()).unwrap());
        let back: History = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        assert_ne!(back.ids(), a.ids(), "a decoded history has new ids");
    }
}
