//! A provider's export, read a chunk at a time as it arrives: CSV with a
//! header naming its columns, or JSON lines. Each record is one line (a
//! quoted CSV field may hold commas and quotes, not line breaks); a line
//! that cannot be taken is kept with its number and why. What makes the
//! whole export unreadable — a header without a status column, more
//! records than a reconciliation takes — is [`ExportReader::refused`].

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::{BadLine, IdempotencyKey, ProviderStatus, action, bulk::records};

/// The longest line taken; a longer one is a bad line.
pub const EXPORT_MAX_LINE_BYTES: usize = 16 * 1024;

/// The most records one reconciliation takes.
pub const EXPORT_MAX_RECORDS: usize = 500_000;

/// The words each column may be headed with (lowercase, `_` for spaces
/// and dashes), as providers name them.
const REFERENCE: &[&str] = &[
    "reference",
    "provider_ref",
    "provider_reference",
    "ref",
    "message_id",
    "transaction_id",
    "charge_id",
    "id",
];
const KEY: &[&str] = &["key", "idempotency_key", "our_key", "custom_id"];
const STATUS: &[&str] = &["status", "state", "event", "outcome", "result"];
const TIME: &[&str] = &[
    "time",
    "timestamp",
    "at",
    "created_at",
    "created",
    "date",
    "sent_at",
    "event_time",
];

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

/// Where each field is in a CSV export's lines.
#[derive(Debug, Clone)]
struct Columns {
    reference: Option<usize>,
    key: Option<usize>,
    status: usize,
    time: usize,
    width: usize,
}

#[derive(Debug, Clone)]
enum Format {
    Csv(Columns),
    JsonLines,
}

/// Reads an export as it arrives (`push` each chunk, then `finish`).
#[derive(Debug)]
pub struct ExportReader {
    words: StatusWords,
    format: Option<Format>,
    partial: Vec<u8>,
    overlong: bool,
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
            line: 0,
            records: 0,
            refused: None,
        }
    }

    /// Reads `chunk`, adding each whole line's record (or why it is bad)
    /// to `out`.
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

    /// Reads the last line (one without a line break after it).
    pub fn finish(&mut self, out: &mut Vec<Result<ProviderRecord, BadLine>>) {
        if !self.partial.is_empty() || self.overlong {
            let line = std::mem::take(&mut self.partial);
            self.read_line(&line, out);
        }
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
        let bad = |reason: String| Err(BadLine { line, reason });
        if overlong {
            out.push(bad(format!(
                "longer than {} KiB",
                EXPORT_MAX_LINE_BYTES / 1024
            )));
            return;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            out.push(bad("not UTF-8 text".into()));
            return;
        };
        let text = text.strip_suffix('\r').unwrap_or(text);
        // A spreadsheet's CSV starts with a byte-order mark.
        let text = if line == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if text.trim().is_empty() {
            return;
        }
        let format = match &self.format {
            Some(format) => format.clone(),
            None if text.trim_start().starts_with('{') => {
                self.format = Some(Format::JsonLines);
                Format::JsonLines
            }
            None => {
                match header(text) {
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
            Format::Csv(columns) => csv_record(&columns, text),
            Format::JsonLines => json_record(text),
        };
        out.push(
            match read.and_then(|fields| record(&self.words, line, fields)) {
                Ok(record) => {
                    self.records += 1;
                    Ok(record)
                }
                Err(reason) => bad(reason),
            },
        );
    }
}

/// A record's fields as text, before they are checked.
struct Fields {
    reference: Option<String>,
    key: Option<String>,
    status: String,
    time: String,
}

fn header(text: &str) -> Result<Columns, String> {
    let Some((_, Ok(names))) = records(text).into_iter().next() else {
        return Err("the header is not a CSV line".into());
    };
    let names: Vec<String> = names
        .iter()
        .map(|n| n.trim().to_lowercase().replace([' ', '-'], "_"))
        .collect();
    let find = |aliases: &[&str]| names.iter().position(|n| aliases.contains(&n.as_str()));
    let needed = |aliases: &[&str], what: &str| {
        find(aliases).ok_or_else(|| {
            format!(
                "the header has no {what} column (name it one of: {})",
                aliases.join(", ")
            )
        })
    };
    let columns = Columns {
        reference: find(REFERENCE),
        key: find(KEY),
        status: needed(STATUS, "status")?,
        time: needed(TIME, "time")?,
        width: names.len(),
    };
    if columns.reference.is_none() && columns.key.is_none() {
        return Err(format!(
            "the header has neither a reference column ({}) nor a key column ({})",
            REFERENCE.join(", "),
            KEY.join(", ")
        ));
    }
    Ok(columns)
}

fn csv_record(columns: &Columns, text: &str) -> Result<Fields, String> {
    let Some((_, fields)) = records(text).into_iter().next() else {
        return Err("not a CSV line".into());
    };
    let fields = fields.map_err(|e| {
        if e.contains("not closed") {
            "a quoted field is not closed (a record is one line)".to_owned()
        } else {
            e
        }
    })?;
    if fields.len() != columns.width {
        return Err(format!(
            "expected {} fields, as the header names, found {}",
            columns.width,
            fields.len()
        ));
    }
    let at = |i: usize| fields[i].clone();
    Ok(Fields {
        reference: columns.reference.map(at),
        key: columns.key.map(at),
        status: at(columns.status),
        time: at(columns.time),
    })
}

fn json_record(text: &str) -> Result<Fields, String> {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
    let find = |aliases: &[&str]| {
        aliases.iter().find_map(|a| match object.get(*a) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
    };
    Ok(Fields {
        reference: find(REFERENCE),
        key: find(KEY),
        status: find(STATUS).ok_or("no status field")?,
        time: find(TIME).ok_or("no time field")?,
    })
}

fn record(words: &StatusWords, line: usize, fields: Fields) -> Result<ProviderRecord, String> {
    let reference = match fields.reference.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(r) => Some(
            action::provider_ref(r)
                .map_err(|e| e.to_string())?
                .map(str::to_owned)
                .ok_or("the reference is blank")?,
        ),
    };
    // A key is taken exactly as written: it may hold spaces.
    let key = match fields.key.as_deref() {
        None | Some("") => None,
        Some(k) => Some(IdempotencyKey::parse(k).map_err(|e| format!("the key: {e}"))?),
    };
    if reference.is_none() && key.is_none() {
        return Err("neither a reference nor a key".into());
    }
    let status = words.status(&fields.status).ok_or_else(|| {
        format!(
            "the status “{}” means neither accepted nor failed here; name it on the form \
             ({}=accepted or {}=failed)",
            fields.status.trim(),
            fields.status.trim(),
            fields.status.trim()
        )
    })?;
    Ok(ProviderRecord {
        line,
        reference,
        key,
        status,
        at: time(&fields.time)?,
    })
}

/// RFC 3339, `YYYY-MM-DD HH:MM:SS` in UTC, or Unix seconds (milliseconds
/// past 10^11), from 2000 to 2099: a time outside is a mistake (a
/// zero, a field in another unit), and would stretch the export's span.
fn time(text: &str) -> Result<DateTime<Utc>, String> {
    let at = any_time(text)?;
    if (2000..2100).contains(&chrono::Datelike::year(&at)) {
        Ok(at)
    } else {
        Err(format!(
            "the time “{}” is not between 2000 and 2099",
            text.trim()
        ))
    }
}

fn any_time(text: &str) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    let unix = text.parse::<i64>().ok().and_then(|n| match n {
        n if n > 100_000_000_000 => DateTime::from_timestamp_millis(n),
        n => DateTime::from_timestamp(n, 0),
    });
    unix.ok_or_else(|| {
        format!("the time “{text}” is not RFC 3339, YYYY-MM-DD HH:MM:SS (UTC) or Unix seconds")
    })
}

#[cfg(test)]
mod tests;
