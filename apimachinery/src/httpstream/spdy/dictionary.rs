//! The preset zlib dictionary of SPDY/3 header blocks.
//!
//! A constant of the SPDY Protocol Draft 3 specification, section 2.6.10.1 ("Compression"),
//! which moby/spdystream's `spdy/dictionary.go` (the framer Kubernetes uses) also carries.
//! Built here from its parts: length-prefixed header words, then a run of plain text.

/// Header names and values, each prefixed in the dictionary by its 4-byte big-endian length.
const WORDS: [&str; 65] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The text that follows the words, without length prefixes.
const TAIL: [&str; 6] = [
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request\
     401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented\
     503 Service Unavailable",
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,",
    "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch",
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
];

/// The dictionary's bytes.
pub fn dictionary() -> Vec<u8> {
    let mut out = Vec::with_capacity(1423);
    for word in WORDS {
        out.extend_from_slice(&(word.len() as u32).to_be_bytes());
        out.extend_from_slice(word.as_bytes());
    }
    for part in TAIL {
        out.extend_from_slice(part.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn dictionary_shape() {
        let d = super::dictionary();
        assert_eq!(&d[..11], b"\0\0\0\x07options");
        assert!(d.ends_with(b"utf-,*,enq=0."));
        // The specification's dictionary is 1423 bytes long.
        assert_eq!(d.len(), 1423);
    }
}
