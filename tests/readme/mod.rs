//! The README and the longer tour it hands over to (docs/tour.md), run as written: their
//! shell blocks marked `<!-- walkthrough -->` are pasted, in order, into one bash session
//! against a fresh server, as a newcomer would paste them into a second terminal. Every `curl` must be answered 2xx (the tour shows what
//! works; refusals are described in comments), every command must succeed, and the
//! walk must end with the audit verifying the history it made.
//!
//! What the session changes, and only that: the server's address (the README's
//! `127.0.0.1:8080` becomes the test server's), `cargo run --release --` (the test's
//! own `reservations` binary, on the test's database), and `/tmp/` (a directory of the
//! test's own). The blocks that start other servers (mail, NATS, a Redis Cluster, a
//! replica) or a receiver are not marked; their features have their own tests.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// The README's tokens, as its first command sets them.
const README_TOKENS: &str = "admin-secret:admin:staff,web-secret:channel:web,audit-secret:auditor";

/// The marked blocks of `readme`, in order.
fn walkthrough(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "<!-- walkthrough -->" {
            continue;
        }
        let fence = lines.next().unwrap_or_default();
        assert_eq!(
            fence.trim(),
            "```sh",
            "a walkthrough marker is followed by a sh block"
        );
        let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push(block.join("\n"));
    }
    blocks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_readmes_walkthrough_runs_as_written_against_a_fresh_server() {
    // Arrange: a server as the README's first command starts it.
    // The README's tour, then the longer one it hands over to, in one session.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut blocks = Vec::new();
    for page in ["README.md", "docs/tour.md"] {
        let text = std::fs::read_to_string(root.join(page)).expect(page);
        blocks.extend(walkthrough(&text));
    }
    assert!(blocks.len() >= 5, "{} marked blocks", blocks.len());
    let db = TestDb::new().await;
    let server = ServerProcess::start(
        &db,
        &[
            ("API_TOKENS", README_TOKENS.to_owned()),
            ("PAYMENT_WEBHOOK_SECRET", "whsec-demo".to_owned()),
            ("PAYMENT_TIMEOUT_MS", "3000".to_owned()),
        ],
    )
    .await;
    let scratch = std::env::temp_dir().join(format!("readme-{}", db.name));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let statuses = scratch.join("statuses");
    let binary = env!("CARGO_BIN_EXE_reservations");
    let session: String = blocks
        .iter()
        .map(|block| {
            // The scratch files first: the binary's own path may be under /tmp too.
            block
                .replace("/tmp/", &format!("{}/", scratch.display()))
                .replace("http://127.0.0.1:8080", &server.url(""))
                .replace("cargo run --release --", binary)
        })
        .collect::<Vec<_>>()
        .join("\n");
    // Every curl records its status (its own -w, if any, gives way to this one's).
    let script = format!(
        r#"set -euo pipefail
curl() {{
  local out
  out=$(command curl "$@" -w '\n%{{http_code}}') || {{ echo "curl failed: $*" >&2; return 1; }}
  printf '%s\n' "${{out%$'\n'*}}"
  local args="$*"
  printf '%s %s\n' "${{out##*$'\n'}}" "${{args//$'\n'/ }}" >> '{statuses}'
}}
{session}
"#,
        statuses = statuses.display()
    );

    // Act
    let run = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("DATABASE_URL", &db.url)
        .env("RUST_LOG", "warn")
        .output()
        .expect("bash");
    let recorded = std::fs::read_to_string(&statuses).unwrap_or_default();
    let verified = reqwest::Client::new()
        .get(server.url("/v1/audit/verify"))
        .bearer_auth("audit-secret")
        .send()
        .await
        .expect("verify");
    let verified: serde_json::Value = verified.json().await.expect("json");
    drop(server);
    let _ = std::fs::remove_dir_all(&scratch);

    // Assert
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "the walkthrough stopped ({}):\n{stderr}\nstatuses so far:\n{recorded}",
        run.status
    );
    let refused: Vec<&str> = recorded
        .lines()
        .filter(|line| !line.starts_with('2'))
        .collect();
    assert!(
        refused.is_empty(),
        "answered other than 2xx:\n{}",
        refused.join("\n")
    );
    assert!(
        recorded.lines().count() > 40,
        "{} requests made",
        recorded.lines().count()
    );
    assert_eq!(verified["ok"], true, "{verified}");
    db.drop_database().await;
}
