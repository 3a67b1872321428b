//! Rebuild when a mail template changes: they are compiled in with `include_str!`.
fn main() {
    println!("cargo:rerun-if-changed=templates");
}
