//! An `eddy run` fed line by line on stdin, its stdout read as it comes:
//! for jobs whose answer depends on when a row is read (lookup joins
//! against a table that changes under them).

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// See the module docs. Killed when dropped.
pub struct StdinJob {
    child: Child,
    input: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl StdinJob {
    /// Starts `command` (an `eddy run ...`) with stdin and stdout piped.
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (sent, lines) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                if sent.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            input,
            lines,
        }
    }

    /// Writes one input line.
    pub fn send(&mut self, line: &str) {
        let input = self.input.as_mut().expect("stdin is open");
        writeln!(input, "{line}").unwrap();
        input.flush().unwrap();
    }

    /// The next output line, if one comes within `wait`.
    pub fn next_line(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }
}

impl Drop for StdinJob {
    fn drop(&mut self) {
        drop(self.input.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
