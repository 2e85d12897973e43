//! Flink's row-wise string functions DataFusion lacks, each a function of
//! its arguments' text:
//!
//! | function | returns |
//! |---|---|
//! | `BIN(n)` | `n` in binary (two's complement for a negative) |
//! | `HEX(n)`, `HEX(s)` | `n` in upper-case hexadecimal, or the bytes of `s` |
//! | `SHA1(s)` | the SHA-1 digest of `s`, lower-case hex |
//! | `URL_ENCODE(s)`, `URL_DECODE(s)` | `application/x-www-form-urlencoded` in UTF-8, as Java's `URLEncoder`/`URLDecoder` (space is `+`); NULL for text that does not decode |
//! | `PARSE_URL(url, part[, key])` | `HOST`, `PATH`, `QUERY` (or the value of `key` in it), `REF`, `PROTOCOL`, `FILE`, `AUTHORITY`, `USERINFO`; NULL for a URL that does not parse or a part it lacks |
//! | `PRINTF(format, args...)` | `format` with `%s`, `%d`, `%f`, `%x`, `%X`, `%e` (flags `-`, `0`, `+`, width, `.precision`) and `%%` filled in, as Java's `String.format` (a number exactly halfway between two of the precision's is rounded to even, where Java rounds up) |
//! | `CONVERT_TZ(s, from, to)` | the `yyyy-MM-dd HH:mm:ss` time `s` read in zone `from`, written in zone `to` (IANA names, `UTC`, `GMT+08:00`); NULL for a time or zone that does not read |
//!
//! In: any columns (read as text; `HEX` and `BIN` also look at whether the
//! argument is a number). Out: a string column; NULL wherever an argument
//! is NULL.

use std::sync::Arc;

use chrono::{NaiveDateTime, TimeZone};
use datafusion::arrow::array::{Array, ArrayRef, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use sha1::Digest;

use super::arrays;

/// One row's value from its arguments' types and text (all non-NULL).
type Body = fn(&[DataType], &[&str]) -> Option<String>;

/// A string function computed row by row; see the module docs.
#[derive(Debug)]
struct TextFunction {
    name: &'static str,
    arities: &'static [usize],
    body: Body,
    signature: Signature,
}

// A function is known by its name (its body's address says nothing).
impl PartialEq for TextFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TextFunction {}

impl std::hash::Hash for TextFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for TextFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        // No arities listed: one or more arguments (PRINTF's format and
        // what fills it).
        let fits = if self.arities.is_empty() {
            !args.is_empty()
        } else {
            self.arities.contains(&args.len())
        };
        if !fits {
            let wanted = if self.arities.is_empty() {
                "at least 1".to_string()
            } else {
                self.arities
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            };
            return datafusion::common::plan_err!(
                "{}() takes {wanted} arguments, not {}",
                self.name.to_uppercase(),
                args.len()
            );
        }
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let types: Vec<DataType> = args.args.iter().map(|a| a.data_type()).collect();
        let columns = arrays(&args)?
            .iter()
            .map(|a| {
                let text = cast(a, &DataType::Utf8)?;
                match text.as_any().downcast_ref::<StringArray>() {
                    Some(text) => Ok(text.clone()),
                    None => exec_err!("{}: text expected", self.name),
                }
            })
            .collect::<Result<Vec<StringArray>>>()?;
        let mut out = StringBuilder::with_capacity(args.number_rows, args.number_rows * 8);
        let mut row: Vec<&str> = Vec::with_capacity(columns.len());
        for r in 0..args.number_rows {
            row.clear();
            if columns.iter().any(|c| c.is_null(r)) {
                out.append_null();
                continue;
            }
            row.extend(columns.iter().map(|c| c.value(r)));
            out.append_option((self.body)(&types, &row));
        }
        let array: ArrayRef = Arc::new(out.finish());
        Ok(ColumnarValue::Array(array))
    }
}

fn function(name: &'static str, arities: &'static [usize], body: Body) -> ScalarUDF {
    ScalarUDF::from(TextFunction {
        name,
        arities,
        body,
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

/// The functions of this module.
pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        function("bin", &[1], |_, a| {
            a[0].trim().parse::<i64>().ok().map(|n| format!("{n:b}"))
        }),
        function("hex", &[1], |types, a| {
            if types[0].is_integer() {
                a[0].trim().parse::<i64>().ok().map(|n| format!("{n:X}"))
            } else {
                Some(a[0].bytes().map(|b| format!("{b:02X}")).collect())
            }
        }),
        function("sha1", &[1], |_, a| {
            Some(
                sha1::Sha1::digest(a[0].as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            )
        }),
        function("url_encode", &[1], |_, a| {
            Some(url::form_urlencoded::byte_serialize(a[0].as_bytes()).collect())
        }),
        function("url_decode", &[1], |_, a| url_decode(a[0])),
        function("parse_url", &[2, 3], |_, a| {
            parse_url(a[0], a[1], a.get(2).copied())
        }),
        function("printf", &[], |_, a| printf(a[0], &a[1..])),
        function("convert_tz", &[3], |_, a| convert_tz(a[0], a[1], a[2])),
    ]
}

/// Java's `URLDecoder.decode(s, UTF_8)`: `+` is a space; NULL for a bad
/// `%` escape or bytes that are not UTF-8.
fn url_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// `PARSE_URL(url, part[, key])`, as Java's `java.net.URL` names the parts.
fn parse_url(text: &str, part: &str, key: Option<&str>) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let query = url.query();
    let host = url.host_str();
    let userinfo = (!url.username().is_empty()).then(|| match url.password() {
        Some(password) => format!("{}:{password}", url.username()),
        None => url.username().to_string(),
    });
    match (part.to_ascii_uppercase().as_str(), key) {
        ("QUERY", Some(key)) => url
            .query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned()),
        ("QUERY", None) => query.map(str::to_string),
        ("HOST", None) => host.map(str::to_string),
        ("PATH", None) => Some(url.path().to_string()),
        ("REF", None) => url.fragment().map(str::to_string),
        ("PROTOCOL", None) => Some(url.scheme().to_string()),
        ("FILE", None) => Some(match query {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        }),
        ("AUTHORITY", None) => {
            let mut authority = String::new();
            if let Some(userinfo) = &userinfo {
                authority.push_str(userinfo);
                authority.push('@');
            }
            authority.push_str(host?);
            if let Some(port) = url.port() {
                authority.push_str(&format!(":{port}"));
            }
            Some(authority)
        }
        ("USERINFO", None) => userinfo,
        _ => None,
    }
}

/// Java's `String.format` for the common conversions; NULL for a format
/// it cannot fill (an unknown conversion, too few arguments, a number
/// conversion of text that is no number).
fn printf(format: &str, args: &[&str]) -> Option<String> {
    let mut out = String::with_capacity(format.len() + 16);
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while let Some(&f) = chars.peek().filter(|f| "-0+ ".contains(**f)) {
            flags.push(f);
            chars.next();
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        let mut precision = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                p.push(d);
                chars.next();
            }
            precision = Some(p.parse::<usize>().ok()?);
        }
        let conversion = chars.next()?;
        let body = match conversion {
            '%' => "%".to_string(),
            'n' => "\n".to_string(),
            's' | 'S' => {
                let text = args.next()?.to_string();
                let text = match precision {
                    Some(p) => text.chars().take(p).collect(),
                    None => text,
                };
                if conversion == 'S' {
                    text.to_uppercase()
                } else {
                    text
                }
            }
            'd' => {
                let n = args.next()?.trim().parse::<i64>().ok()?;
                if flags.contains('+') && n >= 0 {
                    format!("+{n}")
                } else {
                    n.to_string()
                }
            }
            'x' | 'X' => {
                let n = args.next()?.trim().parse::<i64>().ok()?;
                let hex = format!("{n:x}");
                if conversion == 'X' {
                    hex.to_uppercase()
                } else {
                    hex
                }
            }
            'f' | 'e' | 'E' => {
                let x = args.next()?.trim().parse::<f64>().ok()?;
                let p = precision.unwrap_or(6);
                let text = match conversion {
                    'f' => format!("{x:.p$}"),
                    _ => java_exponent(x, p, conversion == 'E'),
                };
                if flags.contains('+') && x >= 0.0 {
                    format!("+{text}")
                } else {
                    text
                }
            }
            _ => return None,
        };
        let width = width.parse::<usize>().unwrap_or(0);
        let pad = width.saturating_sub(body.chars().count());
        if flags.contains('-') {
            out.push_str(&body);
            out.extend(std::iter::repeat_n(' ', pad));
        } else if flags.contains('0') && "dxXfeE".contains(conversion) {
            // Zeros go after a sign.
            let (sign, digits) = match body.strip_prefix(['-', '+']) {
                Some(rest) => (&body[..1], rest),
                None => ("", body.as_str()),
            };
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', pad));
            out.push_str(digits);
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&body);
        }
    }
    Some(out)
}

/// Java's `%e`: `1.500000e+01` (a sign and at least two exponent digits).
fn java_exponent(x: f64, precision: usize, upper: bool) -> String {
    let text = format!("{x:.precision$e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{mantissa}{e}{sign}{:02}", exponent.abs())
}

/// A zone: an IANA name, or a fixed offset (`GMT+08:00`, `UTC-3`, `+05:30`).
fn zone(name: &str) -> Option<chrono::FixedOffset> {
    let name = name.trim();
    let offset = name
        .strip_prefix("GMT")
        .or_else(|| name.strip_prefix("UTC"))
        .unwrap_or(name);
    if offset.is_empty() {
        return chrono::FixedOffset::east_opt(0);
    }
    if let Some(sign) = offset.chars().next().filter(|c| *c == '+' || *c == '-') {
        let rest = &offset[1..];
        let (h, m) = rest.split_once(':').unwrap_or((rest, "0"));
        let seconds = h.parse::<i32>().ok()? * 3600 + m.parse::<i32>().ok()? * 60;
        return chrono::FixedOffset::east_opt(if sign == '-' { -seconds } else { seconds });
    }
    None
}

/// `CONVERT_TZ(s, from, to)`.
fn convert_tz(text: &str, from: &str, to: &str) -> Option<String> {
    let local = NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S")
        .or_else(|_| NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S%.f"))
        .ok()?;
    let utc = match (zone(from), from.trim().parse::<chrono_tz::Tz>()) {
        (Some(offset), _) => offset.from_local_datetime(&local).single()?.naive_utc(),
        (None, Ok(tz)) => tz.from_local_datetime(&local).earliest()?.naive_utc(),
        (None, Err(_)) => return None,
    };
    let converted = match (zone(to), to.trim().parse::<chrono_tz::Tz>()) {
        (Some(offset), _) => offset.from_utc_datetime(&utc).naive_local(),
        (None, Ok(tz)) => tz.from_utc_datetime(&utc).naive_local(),
        (None, Err(_)) => return None,
    };
    Some(converted.format("%Y-%m-%d %H:%M:%S").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_encoded_decoded_and_taken_apart_as_java_does() {
        let encode =
            |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        assert_eq!(encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
        assert_eq!(
            url_decode("a+b%26c%3Dd%2F%C3%A9").as_deref(),
            Some("a b&c=d/é")
        );
        assert_eq!(url_decode("bad%zz"), None);
        let url = "http://user:pw@facebook.com:8080/path1/p.php?k1=v1&k2=v2#Ref1";
        let part = |p: &str, k: Option<&str>| parse_url(url, p, k);
        assert_eq!(part("HOST", None).as_deref(), Some("facebook.com"));
        assert_eq!(part("PATH", None).as_deref(), Some("/path1/p.php"));
        assert_eq!(part("QUERY", None).as_deref(), Some("k1=v1&k2=v2"));
        assert_eq!(part("QUERY", Some("k2")).as_deref(), Some("v2"));
        assert_eq!(part("REF", None).as_deref(), Some("Ref1"));
        assert_eq!(part("PROTOCOL", None).as_deref(), Some("http"));
        assert_eq!(
            part("FILE", None).as_deref(),
            Some("/path1/p.php?k1=v1&k2=v2")
        );
        assert_eq!(
            part("AUTHORITY", None).as_deref(),
            Some("user:pw@facebook.com:8080")
        );
        assert_eq!(part("USERINFO", None).as_deref(), Some("user:pw"));
        assert_eq!(parse_url("not a url", "HOST", None), None);
    }

    #[test]
    fn printf_fills_in_as_java_string_format() {
        let p = |f: &str, a: &[&str]| printf(f, a);
        assert_eq!(p("%s-%d", &["a", "1"]).as_deref(), Some("a-1"));
        assert_eq!(
            p("%5.2f|%-4s|%04d|%x|%%", &["3.14159", "ab", "42", "255"]).as_deref(),
            Some(" 3.14|ab  |0042|ff|%")
        );
        assert_eq!(p("%e", &["15"]).as_deref(), Some("1.500000e+01"));
        assert_eq!(
            p("%+d %05.1f", &["7", "-2.26"]).as_deref(),
            Some("+7 -02.3")
        );
        assert_eq!(p("%d", &["x"]), None);
        assert_eq!(p("%s %s", &["only"]), None);
    }

    #[test]
    fn times_move_between_zones() {
        assert_eq!(
            convert_tz("1970-01-01 00:00:00", "UTC", "America/Los_Angeles").as_deref(),
            Some("1969-12-31 16:00:00")
        );
        assert_eq!(
            convert_tz("2024-06-01 12:00:00", "Europe/Berlin", "GMT+08:00").as_deref(),
            Some("2024-06-01 18:00:00")
        );
        assert_eq!(convert_tz("2024-06-01 12:00:00", "Mars/Base", "UTC"), None);
    }
}
