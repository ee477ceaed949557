//! Google's published canonicalization test vectors (Safe Browsing v4 "URLs and Hashing",
//! section "Canonicalization"; the same list as Web Risk's), copied verbatim, plus the inputs
//! Google's Go client (`google/safebrowsing`, `urls_test.go`) expects to fail.

use urlseen_canon::{CanonError, Profile, canonicalize};

fn canon(url: &str) -> String {
    canonicalize(url, Profile::SafeBrowsing).unwrap_or_else(|e| panic!("{url:?}: {e}"))
}

/// All of Google's vectors, in the order of the page.
const GOOGLE_VECTORS: &[(&str, &str)] = &[
    ("http://host/%25%32%35", "http://host/%25"),
    ("http://host/%25%32%35%25%32%35", "http://host/%25%25"),
    ("http://host/%2525252525252525", "http://host/%25"),
    ("http://host/asdf%25%32%35asd", "http://host/asdf%25asd"),
    ("http://host/%%%25%32%35asd%%", "http://host/%25%25%25asd%25%25"),
    ("http://www.google.com/", "http://www.google.com/"),
    (
        "http://%31%36%38%2e%31%38%38%2e%39%39%2e%32%36/%2E%73%65%63%75%72%65/%77%77%77%2E%65%62%61%79%2E%63%6F%6D/",
        "http://168.188.99.26/.secure/www.ebay.com/",
    ),
    (
        "http://195.127.0.11/uploads/%20%20%20%20/.verify/.eBaysecure=updateuserdataxplimnbqmn-xplmvalidateinfoswqpcmlx=hgplmcx/",
        "http://195.127.0.11/uploads/%20%20%20%20/.verify/.eBaysecure=updateuserdataxplimnbqmn-xplmvalidateinfoswqpcmlx=hgplmcx/",
    ),
    (
        "http://host%23.com/%257Ea%2521b%2540c%2523d%2524e%25f%255E00%252611%252A22%252833%252944_55%252B",
        "http://host%23.com/~a!b@c%23d$e%25f^00&11*22(33)44_55+",
    ),
    ("http://3279880203/blah", "http://195.127.0.11/blah"),
    ("http://www.google.com/blah/..", "http://www.google.com/"),
    ("www.google.com/", "http://www.google.com/"),
    ("www.google.com", "http://www.google.com/"),
    ("http://www.evil.com/blah#frag", "http://www.evil.com/blah"),
    ("http://www.GOOgle.com/", "http://www.google.com/"),
    ("http://www.google.com.../", "http://www.google.com/"),
    ("http://www.google.com/foo\tbar\rbaz\n2", "http://www.google.com/foobarbaz2"),
    ("http://www.google.com/q?", "http://www.google.com/q?"),
    ("http://www.google.com/q?r?", "http://www.google.com/q?r?"),
    ("http://www.google.com/q?r?s", "http://www.google.com/q?r?s"),
    ("http://evil.com/foo#bar#baz", "http://evil.com/foo"),
    ("http://evil.com/foo;", "http://evil.com/foo;"),
    ("http://evil.com/foo?bar;", "http://evil.com/foo?bar;"),
    // The page writes the input as bytes "\x01\x80"; see `raw_byte_vector` below.
    ("http://notrailingslash.com", "http://notrailingslash.com/"),
    ("http://www.gotaport.com:1234/", "http://www.gotaport.com/"),
    ("  http://www.google.com/  ", "http://www.google.com/"),
    ("http:// leadingspace.com/", "http://%20leadingspace.com/"),
    ("http://%20leadingspace.com/", "http://%20leadingspace.com/"),
    ("%20leadingspace.com/", "http://%20leadingspace.com/"),
    ("https://www.securesite.com/", "https://www.securesite.com/"),
    ("http://host.com/ab%23cd", "http://host.com/ab%23cd"),
    ("http://host.com//twoslashes?more//slashes", "http://host.com/twoslashes?more//slashes"),
];

#[test]
fn googles_vectors() {
    for (input, want) in GOOGLE_VECTORS {
        assert_eq!(canon(input), *want, "input {input:?}");
    }
}

/// Google: `Canonicalize("http://\x01\x80.com/") = "http://%01%80.com/"`, with the byte 0x80.
/// A `&str` cannot hold a lone 0x80 byte: the nearest input is U+0080, whose UTF-8 form
/// (0xC2 0x80) is escaped byte by byte. Escaping itself is as specified.
#[test]
fn raw_byte_vector() {
    assert_eq!(canon("http://\x01\u{80}.com/"), "http://%01%C2%80.com/");
    // The escaped form of Google's byte input gives Google's answer.
    assert_eq!(canon("http://%01%80.com/"), "http://%01%80.com/");
}

/// Inputs without a usable host, from `TestCanonicalURL` in Google's Go client: all fail.
#[test]
fn inputs_without_a_host_fail() {
    for input in [
        "",
        ":",
        "/blah",
        "#ref",
        "/blah#ref",
        "?query#ref",
        "/blah?query#ref",
        "/blah;param",
        "http://#ref",
        "http:///blah#ref",
        "http://?query#ref",
        "http:///blah?query#ref",
        "http:///blah;param",
        "http:///blah;param?query#ref",
        "mailto:bryner@google.com",
    ] {
        assert!(canonicalize(input, Profile::SafeBrowsing).is_err(), "{input:?}");
    }
    assert!(matches!(
        canonicalize("mailto:bryner@google.com", Profile::SafeBrowsing),
        Err(CanonError::UnsupportedScheme { scheme }) if scheme == "mailto"
    ));
}

/// Host and path cases of Google's Go client (`TestCanonicalHost`, `TestCanonicalPath`,
/// `TestCanonicalURL`) where its output matches the page's rules.
#[test]
fn googles_client_cases() {
    assert_eq!(canon("http://google.com./foo.html"), "http://google.com/foo.html");
    assert_eq!(canon("http://google.com.:8080/foo.html"), "http://google.com/foo.html");
    assert_eq!(canon("http://google...com/foo.html"), "http://google.com/foo.html");
    assert_eq!(canon("http://..google.com/foo.html"), "http://google.com/foo.html");
    assert_eq!(canon("http://0x12.0x43.0x44.0x01"), "http://18.67.68.1/");
    assert_eq!(canon("http://192.168.0.1:80/index.html"), "http://192.168.0.1/index.html");
    assert_eq!(canon("http://a.com/foo/.././bar/./../foo.html"), "http://a.com/foo.html");
    assert_eq!(canon("http://a.com//a//b///c////"), "http://a.com/a/b/c/");
    assert_eq!(canon("ftp://ftp.myfiles.com/"), "ftp://ftp.myfiles.com/");
    assert_eq!(canon("http://some%1bhost.com/%1b"), "http://some%1Bhost.com/%1B");
    assert_eq!(canon("http://www.\u{fc}mlat.com/"), "http://www.xn--mlat-zra.com/");
    assert_eq!(canon("http://[2001:470:1:18::114]/"), "http://[2001:470:1:18::114]/");
    assert_eq!(canon("http%3A%2F%2Fwackyurl.com:80/"), "http://wackyurl.com/");
    assert_eq!(canon("http://W!eird<>Ho$^.com/"), "http://w!eird<>ho$^.com/");
    assert_eq!(canon("ftp://host.com?q"), "ftp://host.com/?q");
}

/// Bracketed IPv6 hosts, as Google's current reference describes.
#[test]
fn ipv6_hosts() {
    assert_eq!(canon("http://[2001:0db8:0000::1]/"), "http://[2001:db8::1]/");
    assert_eq!(canon("http://[::ffff:1.2.3.4]/x"), "http://1.2.3.4/x");
    assert_eq!(canon("http://[64:ff9b::1.2.3.4]/"), "http://1.2.3.4/");
    assert_eq!(
        canon("http://[FEDC:BA98:7654:3210:FEDC:BA98:7654:3210]:80/index.html"),
        "http://[fedc:ba98:7654:3210:fedc:ba98:7654:3210]/index.html"
    );
    assert!(canonicalize("http://[::1/", Profile::SafeBrowsing).is_err());
}
