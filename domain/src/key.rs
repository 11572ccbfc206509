//! Idempotency keys and consumer names: opaque, byte-exact strings that must
//! survive every URL, query and page untouched.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::{Deserialize, Serialize};

/// Why a key (or consumer name) was refused. Each message is written for the
/// person who pasted the value, because it ends up on a 400 page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum KeyError {
    #[error("the {what} is empty")]
    Empty { what: &'static str },
    #[error("the {what} is {bytes} bytes long; the limit is {limit} bytes")]
    TooLong {
        what: &'static str,
        bytes: usize,
        limit: usize,
    },
    #[error("the {what} contains a control character (U+{code:04X}) at byte {at}")]
    ControlCharacter {
        what: &'static str,
        code: u32,
        at: usize,
    },
    #[error("the {what} is not valid percent-encoded UTF-8")]
    BadEncoding { what: &'static str },
    #[error(
        "the {what} contains an invisible or text-direction character (U+{code:04X}) at byte \
         {at}, which would make it read as another name"
    )]
    Invisible {
        what: &'static str,
        code: u32,
        at: usize,
    },
}

/// Characters that change how text reads without being seen: zero-width
/// spaces and joiners, the soft hyphen, and the bidirectional controls
/// (embeddings, overrides, isolates, marks). Keys may hold any of them (a
/// key is whatever the consumer used); a name a person is known by, or a
/// reason the audit log keeps, may not, so an audit row reading "admin" is
/// admin.
pub fn is_invisible_or_bidi(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// The name of an account, as a person, the identity proxy or an OpenID
/// provider gives it: a consumer name's rules (not empty, at most 128
/// bytes, no control character, trimmed), and no invisible or
/// text-direction character ([`is_invisible_or_bidi`]), so an audit row
/// reading "admin" is admin.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AccountName(String);

impl AccountName {
    pub fn parse(text: impl AsRef<str>) -> Result<Self, KeyError> {
        let name = ConsumerName::parse(text.as_ref().trim())?;
        if let Some((at, c)) = name
            .as_str()
            .char_indices()
            .find(|(_, c)| is_invisible_or_bidi(*c))
        {
            return Err(KeyError::Invisible {
                what: "account name",
                code: c as u32,
                at,
            });
        }
        Ok(AccountName(name.0))
    }

    /// A name read back from Idem's own tables, which hold only names
    /// [`parse`](Self::parse) let in.
    pub fn of_row(name: String) -> Self {
        AccountName(name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A name the rules of [`TokenName`] refuse; the text says them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "“{0}” is not a token name: use 1 to 64 lower-case letters, digits, '-', '_' and '.', starting with a letter or digit."
)]
pub struct BadTokenName(pub String);

/// An API token's name: 1 to 64 lower-case ASCII letters, digits, `-`,
/// `_` and `.`, starting with a letter or digit (it names the token in the
/// audit log's actor, `owner (token name)`, and on the command line).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TokenName(String);

impl TokenName {
    pub const MAX_BYTES: usize = 64;

    pub fn parse(text: impl AsRef<str>) -> Result<Self, BadTokenName> {
        let text = text.as_ref();
        let valid = (1..=Self::MAX_BYTES).contains(&text.len())
            && text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        if valid {
            Ok(TokenName(text.to_owned()))
        } else {
            let shown: String = text.chars().take(80).filter(|c| !c.is_control()).collect();
            Err(BadTokenName(shown))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TokenName {
    type Error = BadTokenName;
    fn try_from(value: String) -> Result<Self, BadTokenName> {
        Self::parse(value)
    }
}

impl From<TokenName> for String {
    fn from(value: TokenName) -> String {
        value.0
    }
}

impl fmt::Display for TokenName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn validate(value: &str, what: &'static str, limit: usize) -> Result<(), KeyError> {
    if value.is_empty() {
        return Err(KeyError::Empty { what });
    }
    if value.len() > limit {
        return Err(KeyError::TooLong {
            what,
            bytes: value.len(),
            limit,
        });
    }
    if let Some((at, c)) = value.char_indices().find(|(_, c)| c.is_control()) {
        return Err(KeyError::ControlCharacter {
            what,
            code: c as u32,
            at,
        });
    }
    Ok(())
}

/// A business idempotency key such as `renewal:account-1842:2026-09-30`.
///
/// Any UTF-8 of 1..=[`IdempotencyKey::MAX_BYTES`] bytes without control
/// characters (which includes NUL). Keys are compared byte for byte: NFC and
/// NFD spellings of the same text are different keys, as they are to the
/// consumer that wrote them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The documented bound, in bytes (not characters).
    pub const MAX_BYTES: usize = 512;

    pub fn parse(value: impl Into<String>) -> Result<Self, KeyError> {
        let value = value.into();
        validate(&value, "idempotency key", Self::MAX_BYTES)?;
        Ok(Self(value))
    }

    /// Decodes one percent-encoded URL path segment, exactly once.
    pub fn from_segment(segment: &str) -> Result<Self, KeyError> {
        Self::parse(decode_segment(segment, "idempotency key")?)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as one URL path segment.
    pub fn to_segment(&self) -> String {
        encode_segment(&self.0)
    }
}

/// The name of a consumer (a worker group reading one queue), such as
/// `reminders`. Same rules as keys, with a smaller bound.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ConsumerName(String);

impl ConsumerName {
    pub const MAX_BYTES: usize = 128;

    pub fn parse(value: impl Into<String>) -> Result<Self, KeyError> {
        let value = value.into();
        validate(&value, "consumer name", Self::MAX_BYTES)?;
        Ok(Self(value))
    }

    pub fn from_segment(segment: &str) -> Result<Self, KeyError> {
        Self::parse(decode_segment(segment, "consumer name")?)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn to_segment(&self) -> String {
        encode_segment(&self.0)
    }
}

macro_rules! string_newtype_conversions {
    ($ty:ident) => {
        impl TryFrom<String> for $ty {
            type Error = KeyError;
            fn try_from(value: String) -> Result<Self, KeyError> {
                Self::parse(value)
            }
        }
        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.0
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
string_newtype_conversions!(IdempotencyKey);
string_newtype_conversions!(ConsumerName);
string_newtype_conversions!(AccountName);

/// Everything but RFC 3986 unreserved characters and `:`/`@` (which are legal
/// in a path segment and keep `renewal:account-1842` readable in a link).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b':')
    .remove(b'@');

/// Percent-encodes `value` as a single URL path segment: `/`, `%`, `?`, `#`,
/// `+`, spaces and all non-ASCII bytes are escaped.
pub fn encode_segment(value: &str) -> String {
    let encoded = utf8_percent_encode(value, SEGMENT).to_string();
    // "." and ".." are dot-segments that browsers and proxies resolve away.
    match encoded.as_str() {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => encoded,
    }
}

/// Decodes a percent-encoded path segment exactly once. `+` stays `+`.
pub fn decode_segment(segment: &str, what: &'static str) -> Result<String, KeyError> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| KeyError::BadEncoding { what })
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_account_name_refuses_invisible_and_text_direction_characters() {
        assert_eq!(
            AccountName::parse("  olga@example.com ").unwrap().as_str(),
            "olga@example.com"
        );
        assert_eq!(
            AccountName::parse("دانيال").unwrap().as_str(),
            "دانيال",
            "right-to-left letters are letters"
        );
        for sneaky in [
            "adm\u{200B}in",
            "\u{202E}nimda",
            "admin\u{2066}",
            "ad\u{00AD}min",
            "\u{FEFF}admin",
        ] {
            assert!(
                matches!(AccountName::parse(sneaky), Err(KeyError::Invisible { .. })),
                "{sneaky:?}"
            );
        }
        assert!(
            IdempotencyKey::parse("order:\u{202E}42").is_ok(),
            "a key is whatever the consumer used"
        );
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_with_url_metacharacters_round_trip_through_one_segment() {
        for raw in [
            "renewal:account-1842:2026-09-30",
            "refund:EU/2026/Ø-1842",
            "x%20y",
            "a%2Fb",
            "50% off #7?x=1&y=2",
            "a+b c",
            "💸 pay_7f3",
            "حساب-1842",
            "\u{202E}evil",
            ".",
            "..",
        ] {
            let key = IdempotencyKey::parse(raw).unwrap();
            let segment = key.to_segment();
            assert!(!segment.contains('/'), "{segment}");
            assert!(
                !segment.contains('?') && !segment.contains('#'),
                "{segment}"
            );
            assert_eq!(IdempotencyKey::from_segment(&segment).unwrap(), key);
        }
    }

    #[test]
    fn a_literal_percent_sequence_is_decoded_once_not_twice() {
        // The key is the five characters `a%2Fb`; its segment is `a%252Fb`.
        let key = IdempotencyKey::parse("a%2Fb").unwrap();
        assert_eq!(key.to_segment(), "a%252Fb");
        assert_eq!(
            IdempotencyKey::from_segment("a%252Fb").unwrap().as_str(),
            "a%2Fb"
        );
    }

    #[test]
    fn empty_overlong_and_control_character_keys_are_refused_with_a_reason() {
        assert_eq!(
            IdempotencyKey::parse(""),
            Err(KeyError::Empty {
                what: "idempotency key"
            })
        );
        let long = "é".repeat(257); // 514 bytes, 257 characters
        assert!(matches!(
            IdempotencyKey::parse(long),
            Err(KeyError::TooLong { bytes: 514, .. })
        ));
        assert!(IdempotencyKey::parse("x".repeat(512)).is_ok());
        assert!(matches!(
            IdempotencyKey::parse("a\0b"),
            Err(KeyError::ControlCharacter { code: 0, at: 1, .. })
        ));
        assert!(matches!(
            IdempotencyKey::parse("a\nb"),
            Err(KeyError::ControlCharacter { code: 10, .. })
        ));
        assert_eq!(
            IdempotencyKey::from_segment("%FF%FE"),
            Err(KeyError::BadEncoding {
                what: "idempotency key"
            })
        );
    }

    #[test]
    fn nfc_and_nfd_spellings_are_different_keys() {
        let nfc = IdempotencyKey::parse("caf\u{e9}").unwrap();
        let nfd = IdempotencyKey::parse("cafe\u{301}").unwrap();
        assert_ne!(nfc, nfd);
        assert_ne!(nfc.to_segment(), nfd.to_segment());
    }

    proptest! {
        #[test]
        fn every_valid_key_round_trips_byte_exactly(raw in "[^\\p{Cc}]{1,120}") {
            prop_assume!(raw.len() <= IdempotencyKey::MAX_BYTES);
            let key = IdempotencyKey::parse(raw.clone()).unwrap();
            let back = IdempotencyKey::from_segment(&key.to_segment()).unwrap();
            prop_assert_eq!(back.as_str().as_bytes(), raw.as_bytes());
        }

        #[test]
        fn decoding_never_panics(segment in ".{0,200}") {
            let _ = IdempotencyKey::from_segment(&segment);
        }
    }
}
