//! Content types of static files by extension. The default build carries the types a web
//! site serves, as a `match` (code, no pointer table); the cargo feature `mime-db` asks
//! mime_guess's full database (about 1,200 extensions) first. mime_guess is not the default
//! because its table costs about 190 KB of the library (relocations for every entry), more
//! than the size budget has room for.

/// The type of a file named `name` ("application/octet-stream" when unknown).
pub(crate) fn guess(name: &str) -> &'static str {
    let Some((_, ext)) = name.rsplit_once('.') else { return "application/octet-stream" };
    #[cfg(feature = "mime-db")]
    if let Some(t) = mime_guess::from_ext(ext).first_raw() {
        return t;
    }
    if ext.len() > 12 {
        return "application/octet-stream";
    }
    let mut lower = [0u8; 12];
    for (d, s) in lower.iter_mut().zip(ext.bytes()) {
        *d = s.to_ascii_lowercase();
    }
    by_extension(&lower[..ext.len()])
}

fn by_extension(ext: &[u8]) -> &'static str {
    match ext {
        b"html" | b"htm" | b"shtml" => "text/html",
        b"css" => "text/css",
        b"js" | b"mjs" | b"cjs" => "text/javascript",
        b"json" | b"map" => "application/json",
        b"jsonld" => "application/ld+json",
        b"geojson" => "application/geo+json",
        b"webmanifest" => "application/manifest+json",
        b"txt" | b"text" | b"log" | b"conf" | b"ini" => "text/plain",
        b"md" | b"markdown" => "text/markdown",
        b"csv" => "text/csv",
        b"tsv" => "text/tab-separated-values",
        b"xml" | b"xsl" | b"xsd" => "application/xml",
        b"rss" => "application/rss+xml",
        b"atom" => "application/atom+xml",
        b"yaml" | b"yml" => "application/yaml",
        b"toml" => "application/toml",
        b"ics" => "text/calendar",
        b"vcf" => "text/vcard",
        b"svg" | b"svgz" => "image/svg+xml",
        b"png" => "image/png",
        b"jpg" | b"jpeg" | b"jpe" => "image/jpeg",
        b"gif" => "image/gif",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"ico" => "image/x-icon",
        b"bmp" => "image/bmp",
        b"tif" | b"tiff" => "image/tiff",
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"ttf" => "font/ttf",
        b"otf" => "font/otf",
        b"eot" => "application/vnd.ms-fontobject",
        b"wasm" => "application/wasm",
        b"pdf" => "application/pdf",
        b"rtf" => "application/rtf",
        b"zip" => "application/zip",
        b"gz" | b"tgz" => "application/gzip",
        b"br" => "application/x-brotli",
        b"zst" => "application/zstd",
        b"bz2" => "application/x-bzip2",
        b"xz" => "application/x-xz",
        b"7z" => "application/x-7z-compressed",
        b"tar" => "application/x-tar",
        b"rar" => "application/vnd.rar",
        b"jar" => "application/java-archive",
        b"epub" => "application/epub+zip",
        b"doc" => "application/msword",
        b"docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        b"xls" => "application/vnd.ms-excel",
        b"xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        b"ppt" => "application/vnd.ms-powerpoint",
        b"pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        b"odt" => "application/vnd.oasis.opendocument.text",
        b"ods" => "application/vnd.oasis.opendocument.spreadsheet",
        b"mp3" => "audio/mpeg",
        b"ogg" | b"oga" | b"opus" => "audio/ogg",
        b"wav" => "audio/wav",
        b"flac" => "audio/flac",
        b"m4a" => "audio/mp4",
        b"aac" => "audio/aac",
        b"weba" => "audio/webm",
        b"mp4" | b"m4v" => "video/mp4",
        b"webm" => "video/webm",
        b"ogv" => "video/ogg",
        b"mov" => "video/quicktime",
        b"avi" => "video/x-msvideo",
        b"mkv" => "video/x-matroska",
        b"mpeg" | b"mpg" => "video/mpeg",
        b"sh" => "application/x-sh",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::{by_extension, guess};

    #[test]
    fn common_web_types_are_known_and_case_does_not_matter() {
        assert_eq!(guess("index.HTML"), "text/html");
        assert_eq!(guess("a.b.css"), "text/css");
        assert!(guess("app.js").ends_with("/javascript"));
        assert_eq!(guess("font.woff2"), "font/woff2");
        assert_eq!(guess("pixel.png"), "image/png");
        assert_eq!(guess("data.json"), "application/json");
        assert_eq!(guess("noext"), "application/octet-stream");
        assert_eq!(guess("x.verylongextension"), "application/octet-stream");
        assert_eq!(by_extension(b"js"), "text/javascript");
        assert_eq!(by_extension(b"unknown"), "application/octet-stream");
    }

    #[cfg(feature = "mime-db")]
    #[test]
    fn the_full_table_knows_rarer_types() {
        assert_eq!(guess("drawing.dwg"), "application/acad");
    }
}
