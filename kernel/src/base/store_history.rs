//! How [`FileStore`](crate::base::store::FileStore) keeps a session's history: beside
//! `state.json`, in `history.jsonl`, one message per line, so that saving the state
//! after a turn appends the new messages instead of re-writing the conversation.
//!
//! `state.json` then holds every other field and `historyLines`: how many lines of
//! `history.jsonl` belong to the session. The lines are appended before the state is
//! replaced, so a crash between the two leaves extra lines that the next load ignores
//! (and the next save re-writes). When the history changed other than by growing
//! (compaction, loaded history after an edit), the file is re-written whole (temp file
//! and rename). A `state.json` with the history inline (no `historyLines`) still loads.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use keel_envelope::{ErrorCode, ErrorPayload};

use crate::base::model::{History, Message};
use crate::base::store::PersistedSession;

/// The file of the history lines.
pub(crate) const FILE: &str = "history.jsonl";
const LINES_KEY: &str = "historyLines";

fn err(what: &str, path: &Path, e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SessionPersistenceFailed,
        format!("{what} {}: {e}", path.display()),
    )
    .with_detail("path", path.display().to_string())
}

fn lines(messages: &[Message]) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    for m in messages {
        serde_json::to_writer(&mut out, m)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// What was written of each session's history in this process: the ids of the
/// messages in `history.jsonl`, in order.
pub(crate) type Written = HashMap<String, Vec<u64>>;

/// Brings `history.jsonl` in `dir` up to `history`: appends what is new when the
/// file holds a prefix of it (as far as this process knows), else re-writes it.
/// `sync`: the bytes reach the disk before this returns.
pub(crate) fn save(
    dir: &Path,
    session_id: &str,
    history: &History,
    written: &mut Written,
    sync: bool,
) -> Result<(), ErrorPayload> {
    let path = dir.join(FILE);
    let ids = history.ids();
    let known = written
        .get(session_id)
        .filter(|w| ids.starts_with(w))
        .map(Vec::len);
    // Forgotten until the write succeeds: a failed append leaves the file unknown.
    let mut record = written.remove(session_id).unwrap_or_default();
    match known {
        Some(n) => {
            if n < ids.len() {
                let bytes = lines(&history[n..]).map_err(|e| err("cannot encode", &path, e))?;
                let mut file = OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(|e| err("cannot open", &path, e))?;
                file.write_all(&bytes)
                    .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
                    .map_err(|e| err("cannot append to", &path, e))?;
                record.extend_from_slice(&ids[n..]);
            }
        }
        None => {
            let tmp = dir.join("history.jsonl.tmp");
            let bytes = lines(history).map_err(|e| err("cannot encode", &path, e))?;
            overwrite(&tmp, &bytes, sync).map_err(|e| err("cannot write", &tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| err("cannot replace", &path, e))?;
            record = ids.to_vec();
        }
    }
    written.insert(session_id.to_owned(), record);
    Ok(())
}

/// Puts the file `tmp` in place of `path`, atomically. Where the system can, the two
/// are exchanged rather than `tmp` renamed over `path`: the replaced file becomes the
/// next save's temporary file (re-written in place), so saving a state after every
/// turn creates and deletes no file. (Each new file costs the file system an inode;
/// ext4 without a journal, for one, skips the inodes freed in the last minutes when it
/// picks one, so a file created and deleted per turn made each save slower than the
/// last.) Without `path` yet, or where exchanging is not supported, `tmp` is renamed.
pub(crate) fn replace(tmp: &Path, path: &Path) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
        if renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RenameFlags::RENAME_EXCHANGE).is_ok() {
            return Ok(());
        }
    }
    fs::rename(tmp, path)
}

/// Writes `bytes` to `path`, which need not exist, as its whole content: in place, with
/// the file cut to length after the write (not before). Opening with `O_TRUNC` freed
/// the file's blocks before each write (with the `discard` mount option, a discard
/// request to the disk on every save), and ext4 then flushed the new data to the disk
/// when the file was closed (its safeguard for files truncated to nothing and written
/// again). The files written so are temporary files put in place by [`replace`], so a
/// torn write is never read. `sync`: the bytes reach the disk before this returns.
pub(crate) fn overwrite(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.write_all(bytes)?;
    let len = bytes.len() as u64;
    if file.metadata()?.len() > len {
        file.set_len(len)?;
    }
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

/// `state.json`'s bytes: the state without its history, plus `historyLines`.
pub(crate) fn state_bytes(state: &PersistedSession) -> Result<Vec<u8>, serde_json::Error> {
    let lines = state.history.len();
    let bare = PersistedSession {
        history: History::new(),
        ..state.clone()
    };
    let mut value = serde_json::to_value(&bare)?;
    if let Some(obj) = value.as_object_mut() {
        obj.remove("history");
        obj.insert(LINES_KEY.to_owned(), lines.into());
    }
    serde_json::to_vec(&value)
}

/// Reads `state.json`'s bytes; the history comes from `history.jsonl` in `dir` when
/// the state says how many lines it has.
pub(crate) fn load(dir: &Path, bytes: &[u8]) -> Result<PersistedSession, ErrorPayload> {
    let state_path = dir.join("state.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| err("corrupt state file", &state_path, e))?;
    let lines = match value.as_object_mut() {
        Some(obj) => match obj.remove(LINES_KEY) {
            Some(n) => {
                let n = n.as_u64().ok_or_else(|| {
                    err(
                        "corrupt state file",
                        &state_path,
                        "historyLines is not a count",
                    )
                })?;
                obj.insert("history".to_owned(), serde_json::Value::Array(Vec::new()));
                Some(n)
            }
            None => None,
        },
        None => None,
    };
    let mut state: PersistedSession =
        serde_json::from_value(value).map_err(|e| err("corrupt state file", &state_path, e))?;
    if let Some(n) = lines {
        state.history = read(&dir.join(FILE), n)?;
    }
    Ok(state)
}

fn read(path: &Path, n: u64) -> Result<History, ErrorPayload> {
    if n == 0 {
        return Ok(History::new());
    }
    let file = File::open(path).map_err(|e| err("cannot read", path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut line = Vec::new();
    let mut messages = Vec::new();
    for i in 0..n {
        line.clear();
        let got = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| err("cannot read", path, e))?;
        if got == 0 || line.last() != Some(&b'\n') {
            return Err(err(
                "corrupt history file",
                path,
                format!("it ends at line {} of {n}", i + 1),
            ));
        }
        let m: Message = serde_json::from_slice(&line)
            .map_err(|e| err("corrupt history file", path, format!("line {}: {e}", i + 1)))?;
        messages.push(m);
    }
    Ok(History::from(messages))
}
