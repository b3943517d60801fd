//! Running the spawned servers under valgrind memcheck (`LAYERBLOOM_VALGRIND=1`, `make
//! test-valgrind`): the command line that wraps the server, and the verdict on its logs when a
//! [`Server`](super::Server) is dropped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::kind::server_binary;

/// Numbers the copies of the logs kept in `$LAYERBLOOM_VALGRIND_LOGS`.
static LOG_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Whether the servers run under valgrind (`LAYERBLOOM_VALGRIND=1`): every spawn is prefixed
/// with `valgrind --error-exitcode=99`, the start and stop timeouts grow, and dropping a
/// [`Server`] fails the test unless each valgrind log of its processes reports no error.
pub fn under_valgrind() -> bool {
    std::env::var("LAYERBLOOM_VALGRIND").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `redis-server`, or `valgrind ... redis-server` under [`under_valgrind`]. Valgrind keeps
/// the process id, so the PING check of `server::spawn` still recognises the server.
pub(super) fn server_command(dir: &Path) -> Command {
    if !under_valgrind() {
        return Command::new(server_binary());
    }
    let mut c = Command::new("valgrind");
    c.arg("--tool=memcheck")
        .arg("--leak-check=no")
        .arg("--error-exitcode=99")
        // Debian's redis-server takes malloc from the system jemalloc: intercept it there.
        .arg("--soname-synonyms=somalloc=libjemalloc.so*")
        .arg(format!("--log-file={}/valgrind.%p.log", dir.display()))
        .arg(format!(
            "--suppressions={}",
            valgrind_suppressions(dir).display()
        ))
        .arg("--track-origins=yes")
        .arg(server_binary());
    c
}

/// Writes the suppression file into the server's dir. LZF compression (RDB and DUMP strings)
/// probes a hash table it deliberately leaves uninitialised: a known, harmless report that
/// Redis's own `src/valgrind.sup` suppresses the same way.
fn valgrind_suppressions(dir: &Path) -> PathBuf {
    let path = dir.join("valgrind.supp");
    let text = "{\n   lzf-uninitialised-hash-table-cond\n   Memcheck:Cond\n   fun:lzf_compress\n}\n\
                {\n   lzf-uninitialised-hash-table-value8\n   Memcheck:Value8\n   fun:lzf_compress\n}\n";
    fs::write(&path, text).expect("cannot write valgrind.supp");
    path
}

/// Lines valgrind writes when it reports an error (also in the log of a killed process,
/// which has no final summary).
const VALGRIND_ERROR_MARKS: [&str; 8] = [
    "Invalid read",
    "Invalid write",
    "Invalid free",
    "Mismatched free",
    "uninitialised",
    "Syscall param",
    "overlap",
    "Process terminating with default action of signal 11",
];

/// Under valgrind: copies the logs to `$LAYERBLOOM_VALGRIND_LOGS` (if set) and panics unless
/// every log of the dir reports zero errors.
pub(super) fn valgrind_verdict(dir: &Path) {
    if !under_valgrind() || std::thread::panicking() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut bad = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("valgrind.") && name.ends_with(".log")) {
            continue;
        }
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        if let Some(keep) = std::env::var_os("LAYERBLOOM_VALGRIND_LOGS") {
            let keep = PathBuf::from(keep);
            let _ = fs::create_dir_all(&keep);
            let n = LOG_COUNTER.fetch_add(1, Ordering::Relaxed);
            let _ = fs::write(
                keep.join(format!("{}-{n}-{name}", std::process::id())),
                &text,
            );
        }
        let clean = if text.contains("ERROR SUMMARY:") {
            text.contains("ERROR SUMMARY: 0 errors")
        } else {
            // Killed (SIGKILL) before the summary: no error may have been reported.
            !VALGRIND_ERROR_MARKS.iter().any(|m| text.contains(m))
        };
        if !clean {
            bad.push(format!("{name}:\n{text}"));
        }
    }
    if !bad.is_empty() {
        panic!(
            "valgrind reported errors (dir kept: {}):\n{}",
            dir.display(),
            bad.join("\n")
        );
    }
}
