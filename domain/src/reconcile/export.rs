//! A provider's export, read a chunk at a time as it arrives: CSV with a
//! header naming its columns, or JSON lines. A record is one line, but
//! for a quoted CSV field that holds line breaks (up to
//! [`EXPORT_MAX_RECORD_LINES`] lines); a record that cannot be taken is
//! kept with the number of the line it starts on and why. What makes the
//! whole export unreadable — a header without a status column, more
//! records than a reconciliation takes — is [`ExportReader::refused`].

mod fields;

use chrono::{DateTime, Utc};

use self::fields::{Columns, CsvError};
use crate::{BadLine, IdempotencyKey, ProviderStatus, bulk::UNCLOSED_QUOTE};

/// The longest line taken; a longer one is a bad line.
pub const EXPORT_MAX_LINE_BYTES: usize = 16 * 1024;

/// The most lines one CSV record may span (a quoted field holding line
/// breaks: an address, a description).
pub const EXPORT_MAX_RECORD_LINES: usize = 32;

/// The most records one reconciliation takes.
pub const EXPORT_MAX_RECORDS: usize = 500_000;

/// The status words every provider's export is read with, unless the
/// catalogue or the form says otherwise.
const ACCEPTED: &[&str] = &[
    "accepted",
    "delivered",
    "sent",
    "succeeded",
    "success",
    "ok",
    "processed",
    "paid",
    "completed",
];
const FAILED: &[&str] = &[
    "failed",
    "failure",
    "bounced",
    "rejected",
    "dropped",
    "declined",
    "error",
    "undeliverable",
    "cancelled",
    "canceled",
];

/// One record of a provider's export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRecord {
    /// The export's line it was read from (1-based, the header included).
    pub line: usize,
    pub reference: Option<String>,
    pub key: Option<IdempotencyKey>,
    pub status: ProviderStatus,
    pub at: DateTime<Utc>,
}

/// How a provider's status words read: its own words (`queued=accepted`)
/// first, then the usual ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusWords {
    own: Vec<(String, ProviderStatus)>,
}

impl StatusWords {
    /// `word=accepted` or `word=failed` pairs, separated by commas or
    /// lines; blank for none.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut own = Vec::new();
        for pair in text
            .split([',', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (word, status) = pair
                .split_once('=')
                .ok_or_else(|| format!("“{pair}” is not word=accepted or word=failed"))?;
            let status = status
                .trim()
                .to_lowercase()
                .parse()
                .map_err(|_| format!("“{pair}”: a status word means accepted or failed"))?;
            let word = word.trim().to_lowercase();
            if word.is_empty() || word.len() > 64 || word.chars().any(char::is_control) {
                return Err(format!(
                    "“{pair}”: the word must be 1 to 64 plain characters"
                ));
            }
            own.push((word, status));
        }
        Ok(Self { own })
    }

    /// These words, then `fallback`'s (the form's over the catalogue's).
    pub fn or(mut self, fallback: &StatusWords) -> Self {
        self.own.extend(fallback.own.iter().cloned());
        self
    }

    /// What `word` means, if anything.
    pub fn status(&self, word: &str) -> Option<ProviderStatus> {
        let word = word.trim().to_lowercase();
        if let Some((_, status)) = self.own.iter().find(|(w, _)| *w == word) {
            return Some(*status);
        }
        if ACCEPTED.contains(&word.as_str()) {
            Some(ProviderStatus::Accepted)
        } else if FAILED.contains(&word.as_str()) {
            Some(ProviderStatus::Failed)
        } else {
            None
        }
    }

    /// The pairs as written back (`queued=accepted, soft_bounce=failed`).
    pub fn to_text(&self) -> String {
        let pairs: Vec<String> = self.own.iter().map(|(w, s)| format!("{w}={s}")).collect();
        pairs.join(", ")
    }
}

#[derive(Debug, Clone)]
enum Format {
    Csv(Columns),
    JsonLines,
}

/// A CSV record whose quoted field runs on past the end of its first
/// line: its lines so far, joined by line breaks.
#[derive(Debug)]
struct OpenRecord {
    columns: Columns,
    line: usize,
    text: String,
    lines: usize,
    /// Whether its quotes so far leave a field open, counted as they
    /// come so that a long field is parsed again only when it may close.
    odd_quotes: bool,
}

/// Reads an export as it arrives (`push` each chunk, then `finish`).
#[derive(Debug)]
pub struct ExportReader {
    words: StatusWords,
    format: Option<Format>,
    partial: Vec<u8>,
    overlong: bool,
    open: Option<OpenRecord>,
    line: usize,
    records: usize,
    refused: Option<String>,
}

impl ExportReader {
    pub fn new(words: StatusWords) -> Self {
        Self {
            words,
            format: None,
            partial: Vec::new(),
            overlong: false,
            open: None,
            line: 0,
            records: 0,
            refused: None,
        }
    }

    /// Reads `chunk`, adding each whole record (or why it is bad) to
    /// `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Result<ProviderRecord, BadLine>>) {
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            self.take(&rest[..end]);
            let line = std::mem::take(&mut self.partial);
            self.read_line(&line, out);
            rest = &rest[end + 1..];
        }
        self.take(rest);
    }

    /// Reads the last line (one without a line break after it), and says
    /// of a quoted field still open that it never closed.
    pub fn finish(&mut self, out: &mut Vec<Result<ProviderRecord, BadLine>>) {
        if !self.partial.is_empty() || self.overlong {
            let line = std::mem::take(&mut self.partial);
            self.read_line(&line, out);
        }
        self.give_up(&format!("{UNCLOSED_QUOTE} by the end of the export"), out);
        if self.format.is_none() && self.refused.is_none() {
            self.refused = Some("The export is empty: it holds no header and no record.".into());
        }
    }

    /// Why the export as a whole cannot be reconciled, if it cannot.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// Records read so far.
    pub fn records(&self) -> usize {
        self.records
    }

    fn take(&mut self, bytes: &[u8]) {
        if self.overlong || self.partial.len() + bytes.len() > EXPORT_MAX_LINE_BYTES {
            self.overlong = true;
            self.partial.clear();
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    fn read_line(&mut self, bytes: &[u8], out: &mut Vec<Result<ProviderRecord, BadLine>>) {
        self.line += 1;
        let line = self.line;
        let overlong = std::mem::take(&mut self.overlong);
        if self.refused.is_some() {
            return;
        }
        let text = if overlong {
            Err(format!("longer than {} KiB", EXPORT_MAX_LINE_BYTES / 1024))
        } else {
            std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
        };
        match text {
            Ok(text) => {
                let text = text.strip_suffix('\r').unwrap_or(text);
                // A spreadsheet's CSV starts with a byte-order mark.
                let text = if line == 1 {
                    text.trim_start_matches('\u{feff}')
                } else {
                    text
                };
                match self.open.take() {
                    Some(open) => self.continue_record(open, text, out),
                    None => self.read_text(line, text, true, out),
                }
            }
            Err(reason) => {
                self.give_up(
                    &format!("{UNCLOSED_QUOTE} before a line that cannot be read"),
                    out,
                );
                out.push(Err(BadLine { line, reason }));
            }
        }
    }

    /// Reads one line that starts a record. A CSV record whose quoted
    /// field is still open at the line's end is kept open for the next
    /// lines if `may_run_on`, else it is bad.
    fn read_text(
        &mut self,
        line: usize,
        text: &str,
        may_run_on: bool,
        out: &mut Vec<Result<ProviderRecord, BadLine>>,
    ) {
        if text.trim().is_empty() || self.refused.is_some() {
            return;
        }
        let format = match &self.format {
            Some(format) => format.clone(),
            None if text.trim_start().starts_with('{') => {
                self.format = Some(Format::JsonLines);
                Format::JsonLines
            }
            None => {
                match fields::header(text) {
                    Ok(columns) => self.format = Some(Format::Csv(columns)),
                    Err(why) => self.refused = Some(format!("Line {line}: {why}.")),
                }
                return;
            }
        };
        if self.records >= EXPORT_MAX_RECORDS {
            self.refused = Some(format!(
                "The export holds more than {EXPORT_MAX_RECORDS} records; reconcile it in parts \
                 (by day, say)."
            ));
            return;
        }
        let read = match format {
            Format::Csv(columns) => match fields::csv_record(&columns, text) {
                // An even count of quotes with a field still open means a
                // stray quote: a bad line, not a record to run on.
                Err(CsvError::Unclosed) if may_run_on && text.matches('"').count() % 2 == 1 => {
                    self.open = Some(OpenRecord {
                        columns,
                        line,
                        text: text.to_owned(),
                        lines: 1,
                        odd_quotes: true,
                    });
                    return;
                }
                Err(CsvError::Unclosed) => Err(format!("{UNCLOSED_QUOTE} on this line")),
                Err(CsvError::Bad(why)) => Err(why),
                Ok(fields) => Ok(fields),
            },
            Format::JsonLines => fields::json_record(text),
        };
        self.keep(line, read, out);
    }

    /// Adds the next line to a record whose quoted field is open, and
    /// reads it once its quotes pair up. In well-formed CSV they pair up
    /// exactly when the field has closed, so a record is parsed once; if
    /// it is still open then, a quote is astray and the record is given up.
    fn continue_record(
        &mut self,
        mut open: OpenRecord,
        text: &str,
        out: &mut Vec<Result<ProviderRecord, BadLine>>,
    ) {
        open.text.push('\n');
        open.text.push_str(text);
        open.lines += 1;
        open.odd_quotes ^= text.matches('"').count() % 2 == 1;
        let too_long =
            open.lines > EXPORT_MAX_RECORD_LINES || open.text.len() > EXPORT_MAX_LINE_BYTES;
        let why = if too_long {
            format!(
                "{UNCLOSED_QUOTE} within {EXPORT_MAX_RECORD_LINES} lines and {} KiB",
                EXPORT_MAX_LINE_BYTES / 1024
            )
        } else if open.odd_quotes {
            self.open = Some(open);
            return;
        } else {
            match fields::csv_record(&open.columns, &open.text) {
                Ok(fields) => return self.keep(open.line, Ok(fields), out),
                Err(CsvError::Unclosed) => format!("{UNCLOSED_QUOTE}: a quote is astray"),
                Err(CsvError::Bad(why)) => why,
            }
        };
        self.open = Some(open);
        self.give_up(&why, out);
    }

    /// A record whose quoted field ran on and could not be read (`why`):
    /// its first line is bad, and the lines after it are read again, each
    /// as a record of its own (so a stray quote costs its own record, and
    /// not the one-line records after it).
    fn give_up(&mut self, why: &str, out: &mut Vec<Result<ProviderRecord, BadLine>>) {
        let Some(open) = self.open.take() else {
            return;
        };
        out.push(Err(BadLine {
            line: open.line,
            reason: format!(
                "{why} (from a quote on this line, over {} lines)",
                open.lines
            ),
        }));
        for (n, text) in open.text.split('\n').enumerate().skip(1) {
            self.read_text(open.line + n, text, false, out);
        }
    }

    fn keep(
        &mut self,
        line: usize,
        read: Result<fields::Fields, String>,
        out: &mut Vec<Result<ProviderRecord, BadLine>>,
    ) {
        out.push(
            match read.and_then(|fields| fields::record(&self.words, line, fields)) {
                Ok(record) => {
                    self.records += 1;
                    Ok(record)
                }
                Err(reason) => Err(BadLine { line, reason }),
            },
        );
    }
}

#[cfg(test)]
mod tests;
