//! Request bodies built from cached fragments, so that a model call does not
//! re-encode the whole history.
//!
//! Each provider turns the neutral history into its wire messages (see
//! [`crate::convert::normalize_history`]). That conversion is local: the history
//! splits into *segments* (a message, or an assistant message with tool calls and the
//! results that follow it) whose wire messages depend only on the segment, except
//! that the last segment may still grow and that some formats merge neighbouring
//! messages of one role. A `Format` encodes the history from a given segment on and
//! says which of its wire messages are final (no later message can change them).
//!
//! A [`FragmentCache`] keeps, for the last few histories it saw (told apart by the
//! message ids of [`keel_kernel::model::History`]), the final wire messages already
//! encoded as one byte string, with a checkpoint after each segment. A request whose
//! history shares a prefix with a cached one reuses the bytes up to the last checkpoint
//! inside the shared prefix and encodes only the rest. Appending to the history (the
//! common case) leaves the cache valid; editing or removing a message invalidates what
//! follows the first changed message only.
//!
//! The bytes are the same as serialising the provider's full JSON body: fragments
//! come from the same conversion functions, and objects are written in the key order
//! of `serde_json`'s map (insertion order with its `preserve_order` feature, sorted
//! otherwise).

use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;

use keel_kernel::model::{History, Message, ToolDef};

/// Histories remembered per model (most recently used kept).
const ENTRIES: usize = 8;

/// Whether `serde_json` writes object keys in insertion order (its `preserve_order`
/// feature, which any crate of the build may turn on) or sorted.
pub(crate) fn preserves_order() -> bool {
    static ORDER: OnceLock<bool> = OnceLock::new();
    *ORDER.get_or_init(|| {
        serde_json::json!({"b": 0, "a": 0})
            .to_string()
            .starts_with("{\"b\"")
    })
}

/// Writes a value in place: given the output and how many bytes the object still
/// needs after it (so one reservation covers both).
pub(crate) type WriteInPlace<'a> = Box<dyn FnOnce(&mut Vec<u8>, usize) + 'a>;

/// A value of a JSON object written by [`write_object`].
pub(crate) enum Part<'a> {
    /// Already encoded.
    Raw(Vec<u8>),
    /// Written in place.
    Write(WriteInPlace<'a>),
}

/// Writes a JSON object from already-encoded values given in insertion order, in the
/// key order `serde_json::Value` would use.
pub(crate) fn raw_object(entries: Vec<(&str, Vec<u8>)>) -> Vec<u8> {
    write_object(
        Vec::new(),
        entries
            .into_iter()
            .map(|(k, v)| (k, Part::Raw(v)))
            .collect(),
    )
}

/// Writes a JSON object from values given in insertion order, in the key order
/// `serde_json::Value` would use, into one buffer: a [`Part::Write`] value (the
/// history) goes straight into it instead of through a buffer of its own.
pub(crate) fn write_object(mut out: Vec<u8>, mut entries: Vec<(&str, Part<'_>)>) -> Vec<u8> {
    if !preserves_order() {
        entries.sort_by(|a, b| a.0.cmp(b.0));
    }
    let size = |(k, v): &(&str, Part<'_>)| {
        k.len()
            + 4
            + match v {
                Part::Raw(b) => b.len(),
                Part::Write(_) => 0,
            }
    };
    let mut left = entries.iter().map(size).sum::<usize>() + 2;
    out.clear();
    out.reserve(left);
    out.push(b'{');
    for (i, entry) in entries.into_iter().enumerate() {
        left -= size(&entry);
        let (k, v) = entry;
        if i > 0 {
            out.push(b',');
        }
        // Keys are the providers' own field names; encoding them keeps this exact.
        out.extend_from_slice(serde_json::Value::from(k).to_string().as_bytes());
        out.push(b':');
        match v {
            Part::Raw(b) => out.extend_from_slice(&b),
            Part::Write(f) => f(&mut out, left),
        }
    }
    out.push(b'}');
    out
}

/// Wire messages no later message can change, produced by the history up to `end`.
#[derive(Debug, Default)]
pub(crate) struct Closed {
    /// Index just past the last history message they cover.
    pub end: usize,
    /// The encoded wire messages (possibly none).
    pub items: Vec<String>,
}

/// A history encoded from some segment on.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    /// Final wire messages, in checkpointed runs (indices relative to the slice given).
    pub closed: Vec<Closed>,
    /// The wire messages after the last checkpoint (they are re-encoded next time).
    pub open: Vec<String>,
}

/// A provider's conversion of history messages into wire messages.
pub(crate) trait Format {
    /// Encodes `messages`, which start at a segment boundary; `first` says whether no
    /// wire message comes before them.
    fn encode(&self, messages: &[Message], first: bool) -> Encoded;
}

/// The index just past the segment that starts at `start`: one message, or an
/// assistant message with tool calls and the tool results that follow it. The second
/// value says whether the segment may still grow (it reaches the end of the history
/// and later tool results would join it).
pub(crate) fn segment_end(messages: &[Message], start: usize) -> (usize, bool) {
    match &messages[start] {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
            let mut i = start + 1;
            while matches!(messages.get(i), Some(Message::Tool { .. })) {
                i += 1;
            }
            (i, i == messages.len())
        }
        _ => (start + 1, false),
    }
}

#[derive(Default)]
struct Entry {
    /// Ids of the messages of the history last encoded with this entry.
    ids: Vec<u64>,
    /// The final wire messages up to the last checkpoint, comma-separated.
    bytes: Vec<u8>,
    /// How many wire messages `bytes` holds.
    count: usize,
    /// After each checkpointed run: (history messages, bytes, wire messages). A
    /// checkpoint at `m` also depends on message `m` (whether it joins the segment
    /// or the wire message before it), so it holds only while that one is shared too.
    checkpoints: Vec<(usize, usize, usize)>,
    /// Last use, for eviction.
    used: u64,
}

impl Entry {
    /// Keeps what holds for a history sharing its first `common` messages with the
    /// last one.
    fn cut(&mut self, common: usize) {
        let keep = self.checkpoints.partition_point(|c| c.0 < common);
        self.checkpoints.truncate(keep);
        let (_, b, c) = self.checkpoints.last().copied().unwrap_or((0, 0, 0));
        self.bytes.truncate(b);
        self.count = c;
        self.ids.truncate(common);
    }

    fn push(&mut self, item: &str) {
        if self.count > 0 {
            self.bytes.push(b',');
        }
        self.bytes.extend_from_slice(item.as_bytes());
        self.count += 1;
    }
}

/// The encoded prefixes of recent histories (see the [module documentation](self)).
pub struct FragmentCache {
    inner: Mutex<(Vec<Entry>, u64)>,
    /// Where request body buffers come from and go back to (see [`Spares`]): the
    /// process's pool, shared by every session's model.
    spares: Arc<Spares>,
    /// The encoded tool list of the last call, with the list it encodes: a session
    /// offers the same shared list (`ModelRequest::tools`) until its tools change.
    tools: Mutex<Option<EncodedTools>>,
}

type EncodedTools = (Arc<[ToolDef]>, Arc<Vec<u8>>);

impl Default for FragmentCache {
    fn default() -> Self {
        static PROCESS: OnceLock<Arc<Spares>> = OnceLock::new();
        Self::with_spares(PROCESS.get_or_init(Default::default).clone())
    }
}

/// Buffers of request bodies sent, back once their calls let go of them: the next
/// body is written into one. A body as long as the conversation, freshly allocated on
/// every call, would cost the allocator a new mapping and the process a page fault
/// per 4 KiB touched (see [`FragmentCache::share`]). The pool is the process's, not a
/// session's: a buffer kept per session would hold a body's worth of memory for each
/// idle session (some 35 KB each after 20 requests, 17 MB for 500 sessions), while
/// only calls in flight need one. At most [`Spares::MAX`] buffers are kept, the larger
/// ones.
#[derive(Debug, Default)]
pub(crate) struct Spares {
    buffers: Mutex<Vec<Vec<u8>>>,
}

impl Spares {
    /// Buffers kept at most.
    const MAX: usize = 4;

    fn take(&self) -> Vec<u8> {
        let mut buf = self
            .buffers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default();
        buf.clear();
        buf
    }

    fn give(&self, buf: Vec<u8>) {
        let mut buffers = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        if buffers.len() < Self::MAX {
            buffers.push(buf);
        } else if let Some(smallest) = buffers.iter_mut().min_by_key(|b| b.capacity()) {
            if smallest.capacity() < buf.capacity() {
                *smallest = buf;
            }
        }
        // Largest last: taken first.
        buffers.sort_by_key(Vec::capacity);
    }
}

/// A request body that goes back to its pool of spare buffers when the last handle
/// on it (the HTTP call, its retries) is dropped.
struct Returned {
    buf: Vec<u8>,
    home: Weak<Spares>,
}

impl AsRef<[u8]> for Returned {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        if let Some(home) = self.home.upgrade() {
            home.give(std::mem::take(&mut self.buf));
        }
    }
}

impl std::fmt::Debug for FragmentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentCache")
            .field("histories", &self.len())
            .finish()
    }
}

/// One copy of each distinct encoded tool list in the process: every session of a
/// runtime offers the same built-in tools, whose encoding (some 17 KB) would otherwise
/// be kept once per session's model.
fn intern(bytes: Vec<u8>) -> Arc<Vec<u8>> {
    // The distinct lists are few (one per provider format and tool set): a scan.
    static LISTS: Mutex<Vec<Weak<Vec<u8>>>> = Mutex::new(Vec::new());
    let mut lists = LISTS.lock().unwrap_or_else(|p| p.into_inner());
    lists.retain(|w| w.strong_count() > 0);
    if let Some(found) = lists
        .iter()
        .filter_map(Weak::upgrade)
        .find(|b| **b == bytes)
    {
        return found;
    }
    let bytes = Arc::new(bytes);
    lists.push(Arc::downgrade(&bytes));
    bytes
}

impl FragmentCache {
    /// The encoding of `tools` (`None` for no tools): the last one when `tools` is the
    /// very list it was made from, else made by `encode` and kept.
    pub(crate) fn tools_bytes(
        &self,
        tools: &Arc<[ToolDef]>,
        encode: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<Arc<Vec<u8>>> {
        if tools.is_empty() {
            return None;
        }
        let mut kept = self.tools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((list, bytes)) = kept.as_ref() {
            if Arc::ptr_eq(list, tools) {
                return Some(bytes.clone());
            }
        }
        let bytes = intern(encode()?);
        *kept = Some((tools.clone(), bytes.clone()));
        Some(bytes)
    }

    /// Writes the wire messages of `history` as a JSON array at the end of `out`:
    /// `lead` (already encoded wire messages that come first, such as a system
    /// message) then the history's. `after` bytes more are reserved for what follows.
    pub(crate) fn write_messages_array(
        &self,
        format: &dyn Format,
        history: &History,
        lead: &[String],
        out: &mut Vec<u8>,
        after: usize,
    ) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, clock) = &mut *guard;
        *clock += 1;
        let ids = history.ids();
        // The entry sharing the longest prefix with this history, else a new one.
        let best = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let common = e.ids.iter().zip(ids).take_while(|(a, b)| a == b).count();
                (i, common)
            })
            .filter(|(_, common)| *common > 0)
            .max_by_key(|(_, common)| *common);
        let index = match best {
            Some((i, common)) => {
                entries[i].cut(common);
                i
            }
            None => {
                if entries.len() >= ENTRIES {
                    if let Some((oldest, _)) =
                        entries.iter().enumerate().min_by_key(|(_, e)| e.used)
                    {
                        entries.swap_remove(oldest);
                    }
                }
                entries.push(Entry::default());
                entries.len() - 1
            }
        };
        let entry = &mut entries[index];
        entry.used = *clock;
        let start = entry.checkpoints.last().map_or(0, |c| c.0);
        let tail = format.encode(&history[start..], entry.count == 0);
        for run in &tail.closed {
            for item in &run.items {
                entry.push(item);
            }
            entry
                .checkpoints
                .push((start + run.end, entry.bytes.len(), entry.count));
        }
        let common = entry.ids.len();
        entry.ids.extend_from_slice(&ids[common..]);
        let size = entry.bytes.len()
            + lead
                .iter()
                .chain(&tail.open)
                .map(|s| s.len() + 1)
                .sum::<usize>()
            + 2;
        out.reserve(size + after);
        out.push(b'[');
        let mut n = 0;
        let mut put = |out: &mut Vec<u8>, bytes: &[u8], count: usize| {
            if count == 0 {
                return;
            }
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(bytes);
            n += count;
        };
        for s in lead {
            put(out, s.as_bytes(), 1);
        }
        put(out, &entry.bytes, entry.count);
        for s in &tail.open {
            put(out, s.as_bytes(), 1);
        }
        out.push(b']');
        if entry.ids.is_empty() {
            // An empty history: nothing to keep.
            entries.swap_remove(index);
        }
    }

    /// A cache taking its body buffers from `spares`.
    pub(crate) fn with_spares(spares: Arc<Spares>) -> Self {
        FragmentCache {
            inner: Mutex::default(),
            spares,
            tools: Mutex::default(),
        }
    }

    /// An empty buffer to write a request body into: a spare one when a body came
    /// back, else a new one.
    pub(crate) fn buffer(&self) -> Vec<u8> {
        self.spares.take()
    }

    /// The body `buf` as shared bytes (retries send it without copying); its buffer
    /// goes back to the pool for a next body once every handle is dropped.
    pub(crate) fn share(&self, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Returned {
            buf,
            home: Arc::downgrade(&self.spares),
        })
    }

    /// How many histories are remembered (for tests).
    #[doc(hidden)]
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// Whether nothing is remembered.
    #[doc(hidden)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_buffer_comes_back_once_every_handle_is_dropped() {
        // A pool of its own: other tests use the process's.
        let cache = FragmentCache::with_spares(Arc::default());
        let mut buf = cache.buffer();
        buf.extend_from_slice(&[7u8; 100_000]);
        let body = cache.share(buf);
        let retry = body.clone();
        drop(body);
        assert_eq!(&retry[..3], &[7, 7, 7]);
        assert_eq!(cache.buffer().capacity(), 0, "still in use by the retry");
        drop(retry);
        let again = cache.buffer();
        assert!(again.is_empty());
        assert!(again.capacity() >= 100_000, "the buffer was not kept");
        // A dropped pool takes nothing back.
        let orphan = cache.share(again);
        drop(cache);
        drop(orphan);
    }

    #[test]
    fn the_pool_keeps_the_largest_few_buffers() {
        let spares = Spares::default();
        for size in [10, 500, 20, 400, 30, 300] {
            spares.give(Vec::with_capacity(size));
        }
        let kept: Vec<usize> = (0..Spares::MAX).map(|_| spares.take().capacity()).collect();
        assert_eq!(kept, vec![500, 400, 300, 30]);
        assert_eq!(
            spares.take().capacity(),
            0,
            "no more than {} kept",
            Spares::MAX
        );
    }
}
