//! Notices that come on their own, outside the request a person follows: a background
//! task that ended by itself (`background.exited`). Each is shown as one line when it
//! arrives: above the prompt while the REPL waits for input (the line being typed is
//! redrawn under it), or between the lines of a running turn.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_envelope::ext::{BackgroundStatus, BackgroundTask};
use keel_envelope::{Envelope, Event};
use keel_kernel::EventStream;
use rustyline::ExternalPrinter;
use tokio::sync::mpsc;

use super::render::Style;

/// Prints while the line editor reads (it redraws the prompt below).
pub(crate) type Printer = Box<dyn ExternalPrinter + Send>;

#[derive(Default)]
struct Inner {
    /// Whether the REPL is at its prompt.
    idle: bool,
    /// Lines that arrived during a turn, shown by the turn.
    pending: Vec<String>,
    printer: Option<Printer>,
}

/// The REPL's notices: a watcher task and the lines it has for the screen.
#[derive(Clone)]
pub(crate) struct Notices {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices").finish_non_exhaustive()
    }
}

/// The line shown for a task that ended by itself.
pub(crate) fn exited_line(st: Style, t: &BackgroundTask) -> String {
    let what = match (t.status.clone(), t.exit_code) {
        (BackgroundStatus::Exited, Some(0)) => st.green("exited with code 0"),
        (BackgroundStatus::Exited, Some(c)) => st.red(&format!("exited with code {c}")),
        (BackgroundStatus::Exited, None) => {
            st.yellow("exited without an exit code (killed by a signal)")
        }
        _ => st.yellow("was stopped at its time limit"),
    };
    format!(
        "{} background task {} {what}: {}",
        st.dim("⏵"),
        t.task_id,
        super::render::first_line(&t.command, 60)
    )
}

impl Notices {
    /// Notices shown through `printer` (none: printed as is).
    fn new(printer: Option<Printer>) -> Self {
        Notices {
            inner: Arc::new(Mutex::new(Inner {
                printer,
                ..Inner::default()
            })),
        }
    }

    /// Starts watching `events` (every session of the kernel) on `rt`.
    pub(crate) fn start(
        rt: &tokio::runtime::Runtime,
        mut events: EventStream,
        printer: Option<Printer>,
        style: Style,
    ) -> Self {
        let notices = Notices::new(printer);
        let me = notices.clone();
        rt.spawn(async move {
            while let Some(env) = events.recv().await {
                me.offer(style, &env);
            }
        });
        notices
    }

    /// Starts watching the events of a daemon connection on `rt`; returns the notices
    /// and the stream of every event, passed on in order for the REPL.
    pub(crate) fn start_remote(
        rt: &tokio::runtime::Runtime,
        mut events: mpsc::UnboundedReceiver<Envelope>,
        printer: Option<Printer>,
        style: Style,
    ) -> (Self, mpsc::UnboundedReceiver<Envelope>) {
        let notices = Notices::new(printer);
        let me = notices.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        rt.spawn(async move {
            while let Some(env) = events.recv().await {
                me.offer(style, &env);
                if tx.send(env).is_err() {
                    break;
                }
            }
        });
        (notices, rx)
    }

    /// Shows `env` when it is a notice.
    fn offer(&self, style: Style, env: &Envelope) {
        if let Event::BackgroundExited(b) = &env.event {
            self.arrived(exited_line(style, &b.task));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn arrived(&self, line: String) {
        let mut inner = self.lock();
        if !inner.idle {
            inner.pending.push(line);
            return;
        }
        let shown = match inner.printer.as_mut() {
            Some(p) => p.print(format!("{line}\n")).is_ok(),
            None => false,
        };
        if !shown {
            // No line editor to draw around (input is not a terminal): print as is.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }

    /// The REPL is about to wait for input; returns the lines that came meanwhile.
    pub(crate) fn at_prompt(&self) -> Vec<String> {
        let mut inner = self.lock();
        inner.idle = true;
        std::mem::take(&mut inner.pending)
    }

    /// The REPL got a line and works on it.
    pub(crate) fn busy(&self) {
        self.lock().idle = false;
    }

    /// Lines that came during the turn, to show now.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().pending)
    }
}
