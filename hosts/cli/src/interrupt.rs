//! Ctrl-C for the commands that run a request (`keel exec`, the REPL).
//!
//! The handler is installed once and listens for the whole run: a Ctrl-C that arrives
//! while the command is busy elsewhere (writing output, drawing a prompt) is kept and
//! seen at the next `recv`. Creating a new `tokio::signal::ctrl_c()` future for each
//! wait would drop a signal delivered between two waits.

#[cfg(unix)]
use std::time::Duration;

/// A Ctrl-C listener alive for as long as the value lives. At the REPL prompt the line
/// editor reads Ctrl-C itself (the terminal is in raw mode); elsewhere the terminal
/// sends SIGINT, which is caught here so that it never kills the process.
#[derive(Debug)]
pub(crate) struct CtrlC {
    #[cfg(unix)]
    sig: Option<tokio::signal::unix::Signal>,
    #[cfg(windows)]
    sig: Option<tokio::signal::windows::CtrlC>,
}

impl CtrlC {
    /// Installs the handler; call inside the runtime.
    pub(crate) fn install() -> Self {
        #[cfg(unix)]
        {
            CtrlC {
                sig: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(windows)]
        {
            CtrlC {
                sig: tokio::signal::windows::ctrl_c().ok(),
            }
        }
        #[cfg(not(any(unix, windows)))]
        {
            CtrlC {}
        }
    }

    /// Waits for the next Ctrl-C (one delivered since the last `recv` counts).
    pub(crate) async fn recv(&mut self) {
        #[cfg(any(unix, windows))]
        {
            match &mut self.sig {
                Some(s) => {
                    if s.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
        #[cfg(not(any(unix, windows)))]
        std::future::pending::<()>().await
    }

    /// Forgets a Ctrl-C pressed before now (between turns).
    pub(crate) async fn drain(&mut self) {
        #[cfg(unix)]
        if let Some(s) = &mut self.sig {
            while let Ok(Some(())) = tokio::time::timeout(Duration::from_millis(1), s.recv()).await
            {
            }
        }
    }
}
