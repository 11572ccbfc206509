//! Build data for `idem --version`, and — when `IDEM_EMBED_SITE` names a
//! built site (`target/site`, written by `cargo xtask site`) — the site's
//! assets compiled into the binary, each with a gzip and a brotli copy,
//! under a name that changes with their content (`/pkg/<hash>/…`), so one
//! file is the whole deployment.

use std::{
    env, fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=IDEM_EMBED_SITE");
    build_data();
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let assets = match env::var("IDEM_EMBED_SITE").ok().filter(|s| !s.is_empty()) {
        Some(site) => embed(Path::new(&site), &out),
        None => {
            "pub const ASSET_HASH: &str = \"\";\npub static ASSETS: &[Asset] = &[];\n".to_owned()
        }
    };
    fs::write(out.join("site_assets.rs"), assets).expect("OUT_DIR is writable");
}

/// `IDEM_BUILD_COMMIT` (the git commit built) and `IDEM_BUILD_DATE` (UTC),
/// for `idem --version`.
fn build_data() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo::rustc-env=IDEM_BUILD_COMMIT={commit}");
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo::rustc-env=IDEM_BUILD_DATE={date}");
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo::rerun-if-changed={head}");
    }
    // A new commit moves the branch, not HEAD.
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo::rerun-if-changed={path}");
    }
}

/// The files of `site/pkg` as Rust source: each file's bytes, a gzip copy
/// and a brotli copy (compressed once here at the highest settings, so
/// serving costs nothing).
fn embed(site: &Path, out: &Path) -> String {
    let pkg = site.join("pkg");
    let mut files: Vec<PathBuf> = fs::read_dir(&pkg)
        .unwrap_or_else(|e| panic!("IDEM_EMBED_SITE: cannot read {}: {e}", pkg.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "wasm")),
        "IDEM_EMBED_SITE: {} holds no .wasm; run `cargo xtask site` first",
        pkg.display()
    );
    let mut hash = Fnv::default();
    let mut entries = String::new();
    for file in &files {
        println!("cargo::rerun-if-changed={}", file.display());
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = fs::read(file).expect("a readable asset");
        hash.write(name.as_bytes());
        hash.write(&bytes);
        let gzipped = out.join(format!("{name}.gz"));
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&bytes).expect("gzip in memory");
        fs::write(&gzipped, encoder.finish().expect("gzip in memory"))
            .expect("OUT_DIR is writable");
        let brotli = out.join(format!("{name}.br"));
        fs::write(&brotli, brotli_of(&bytes)).expect("OUT_DIR is writable");
        entries.push_str(&format!(
            "    Asset {{ name: {name:?}, raw: include_bytes!({raw:?}), gzip: include_bytes!({gz:?}), brotli: include_bytes!({br:?}) }},\n",
            raw = file.canonicalize().expect("an asset path").display().to_string(),
            gz = gzipped.display().to_string(),
            br = brotli.display().to_string(),
        ));
    }
    format!(
        "pub const ASSET_HASH: &str = \"{:016x}\";\npub static ASSETS: &[Asset] = &[\n{entries}];\n",
        hash.0
    )
}

/// `bytes` compressed with brotli at quality 11 and a 4 MiB window (what
/// `brotli -q 11` does).
fn brotli_of(bytes: &[u8]) -> Vec<u8> {
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    let mut compressed = Vec::new();
    brotli::BrotliCompress(&mut &bytes[..], &mut compressed, &params).expect("brotli in memory");
    compressed
}

/// FNV-1a, 64 bits: enough to tell one build's assets from another's.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
