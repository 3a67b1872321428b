//! A real SMTP server on loopback for the mail tests: `smtp_sink.py` (aiosmtpd) as a
//! child process, on a port of its own, writing each message it accepts to a folder the
//! test reads. It can be stopped and started again on the same port, as a mail server
//! that goes away for a while.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct SmtpSink {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// One message as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub raw: String,
}

impl Received {
    /// The value of a header (the first line of it; enough for the ones tests read).
    pub fn header(&self, name: &str) -> Option<String> {
        let prefix = format!("{}:", name.to_ascii_lowercase());
        self.raw
            .lines()
            .take_while(|l| !l.is_empty())
            .find(|l| l.to_ascii_lowercase().starts_with(&prefix))
            .map(|l| l[prefix.len()..].trim().to_owned())
    }
}

impl SmtpSink {
    /// Starts the server on a free port; returns once it accepts connections.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = std::env::temp_dir().join(format!("smtp-sink-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("the sink's folder");
        let mut sink = Self {
            port,
            dir,
            child: None,
        };
        sink.resume().await;
        sink
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Starts the server again (after [`Self::stop`]), on the same port and folder.
    pub async fn resume(&mut self) {
        assert!(self.child.is_none(), "the sink is running");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/smtp_sink.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(self.port.to_string())
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the SMTP sink (aiosmtpd installed: see .ci/run)");
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("the SMTP sink exited ({status}): is aiosmtpd installed?");
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the SMTP sink never listened"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the server (`kill -9`): connections to its port are refused until
    /// [`Self::resume`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every message received so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .expect("the sink's folder")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|p| Received {
                raw: std::fs::read_to_string(p)
                    .expect("a message")
                    .replace("\r\n", "\n"),
            })
            .collect()
    }

    /// Waits until at least `n` messages were received (or 20 s) and returns them all.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let received = self.received();
            if received.len() >= n || tokio::time::Instant::now() >= deadline {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
