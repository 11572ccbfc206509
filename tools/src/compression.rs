//! `idem-tools compression`: what each brotli and gzip level costs on
//! pages Idem serves — bytes out and CPU time per page — with the same
//! encoders the server's compression layer uses (the `brotli` crate at
//! window 22, as `async-compression` sets it, and `flate2`), so the level
//! the server ships is chosen by measurement (docs/BENCHMARKS.md).

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

/// One level's result on one page.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub encoding: &'static str,
    pub level: u32,
    pub bytes: usize,
    /// Median over the timed runs.
    pub time: Duration,
}

/// Brotli at `quality`, window 22: the server's encoder.
pub fn brotli(input: &[u8], quality: u32) -> Vec<u8> {
    let params = ::brotli::enc::BrotliEncoderParams {
        quality: i32::try_from(quality).unwrap_or(11),
        lgwin: 22,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(input.len() / 4);
    {
        let mut writer = ::brotli::CompressorWriter::with_params(&mut out, 4096, &params);
        writer
            .write_all(input)
            .expect("writing to a Vec cannot fail");
    }
    out
}

/// Gzip at `level` (flate2's default backend, as the server's).
pub fn gzip(input: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(input.len() / 4),
        flate2::Compression::new(level),
    );
    encoder
        .write_all(input)
        .expect("writing to a Vec cannot fail");
    encoder.finish().expect("writing to a Vec cannot fail")
}

/// Every brotli quality (0–11) and gzip level (1–9) on `input`, each
/// timed `runs` times after one untimed run.
pub fn measure(input: &[u8], runs: usize) -> Vec<Measured> {
    type Encoder = fn(&[u8], u32) -> Vec<u8>;
    let encoders: [(&'static str, Encoder, std::ops::RangeInclusive<u32>); 2] =
        [("br", brotli, 0..=11), ("gzip", gzip, 1..=9)];
    let mut rows = Vec::new();
    for (encoding, encode, levels) in encoders {
        for level in levels {
            let bytes = encode(input, level).len();
            let mut times: Vec<Duration> = (0..runs.max(1))
                .map(|_| {
                    let start = Instant::now();
                    std::hint::black_box(encode(std::hint::black_box(input), level));
                    start.elapsed()
                })
                .collect();
            times.sort();
            rows.push(Measured {
                encoding,
                level,
                bytes,
                time: times[times.len() / 2],
            });
        }
    }
    rows
}

/// Prints a Markdown table per file.
pub fn run(files: &[PathBuf], runs: usize) -> Result<(), String> {
    for file in files {
        let input = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        print_table(file, &input, &measure(&input, runs));
    }
    Ok(())
}

fn print_table(file: &Path, input: &[u8], rows: &[Measured]) {
    println!("\n{}: {} bytes\n", file.display(), input.len());
    println!("| encoding | level | bytes | of the page | ms per page (median) | MB/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    for row in rows {
        let ms = row.time.as_secs_f64() * 1000.0;
        #[allow(clippy::cast_precision_loss)]
        let (share, rate) = (
            row.bytes as f64 / input.len() as f64 * 100.0,
            input.len() as f64 / row.time.as_secs_f64() / 1e6,
        );
        println!(
            "| {} | {} | {} | {share:.1}% | {ms:.3} | {rate:.0} |",
            row.encoding, row.level, row.bytes
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_round_trips_and_a_higher_level_is_not_larger_on_a_page() {
        let page = "<tr><td><bdi>refund:EU/2026/Ø-1842</bdi></td><td>sent</td></tr>\n".repeat(400);
        let rows = measure(page.as_bytes(), 1);
        assert_eq!(rows.len(), 12 + 9);
        for row in &rows {
            assert!(
                row.bytes < page.len() / 4,
                "{row:?} compressed a repetitive page poorly"
            );
        }
        let mut unpacked = Vec::new();
        std::io::Read::read_to_end(
            &mut ::brotli::Decompressor::new(&brotli(page.as_bytes(), 5)[..], 4096),
            &mut unpacked,
        )
        .unwrap();
        assert_eq!(unpacked, page.as_bytes());
        let mut unpacked = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&gzip(page.as_bytes(), 6)[..]),
            &mut unpacked,
        )
        .unwrap();
        assert_eq!(unpacked, page.as_bytes());
    }
}
