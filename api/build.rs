//! Embeds the staff console (`console/` at the workspace's root): every file of the folder becomes an
//! entry of `console_assets.rs` in `OUT_DIR`, so a file added to the console is served
//! without a list to keep in step, and the server needs nothing beside its binary.
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../console");
    let manifest = std::env::var("CARGO_MANIFEST_DIR")?;
    let out = std::env::var("OUT_DIR")?;
    let folder = Path::new(&manifest).join("../console");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut table = String::from("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for path in files {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        table.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    table.push_str("];\n");
    std::fs::write(Path::new(&out).join("console_assets.rs"), table)?;
    Ok(())
}
