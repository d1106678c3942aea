//! `attnlab-site serve`: a small static file server for a built site (std only).
//!
//! GET and HEAD only, one request per connection, a fixed pool of worker threads, bounded request
//! heads and socket timeouts; paths are percent-decoded and may not leave the site folder (no `..`,
//! no hidden files, symlinks resolved and checked); folders serve their index.html, no listings.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

/// Longest accepted request line plus headers, in bytes.
const MAX_HEAD_BYTES: u64 = 16 * 1024;
/// Worker threads; each serves one connection at a time.
const WORKERS: usize = 8;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{}: not a folder (build the site first: attnlab-site build)", .0.display())]
    NoSite(PathBuf),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("server socket: {0}")]
    Socket(io::Error),
}

/// A bound server; `run` serves until the process ends.
pub struct Server {
    listener: TcpListener,
    root: PathBuf,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) to serve the folder `root`.
    pub fn bind(addr: SocketAddr, root: &Path) -> Result<Server, ServeError> {
        let root = root.canonicalize().map_err(|_| ServeError::NoSite(root.to_path_buf()))?;
        if !root.is_dir() {
            return Err(ServeError::NoSite(root));
        }
        let listener = TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Server { listener, root })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener.local_addr().map_err(ServeError::Socket)
    }

    /// Serves with a fixed pool of workers, each accepting on the shared socket.
    pub fn run(self) -> Result<(), ServeError> {
        let mut workers = Vec::with_capacity(WORKERS);
        for _ in 0..WORKERS {
            let listener = self.listener.try_clone().map_err(ServeError::Socket)?;
            let root = self.root.clone();
            workers.push(thread::spawn(move || loop {
                match listener.accept() {
                    // Errors writing to a client that went away are not the server's problem.
                    Ok((stream, _)) => {
                        let _ = handle(stream, &root);
                    }
                    // E.g. out of file descriptors: wait instead of spinning.
                    Err(_) => thread::sleep(ACCEPT_RETRY),
                }
            }));
        }
        for worker in workers {
            let _ = worker.join();
        }
        Ok(())
    }
}

/// A parsed request line.
struct Request {
    method: String,
    target: String,
}

fn handle(stream: TcpStream, root: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut out = stream.try_clone()?;
    let Some(request) = read_head(stream)? else {
        return respond(&mut out, 400, "text/plain", b"bad request\n", true);
    };
    let head_only = request.method == "HEAD";
    if request.method != "GET" && !head_only {
        return respond(&mut out, 405, "text/plain", b"only GET and HEAD\n", head_only);
    }
    match resolve(root, &request.target) {
        Resolved::File(path) => send_file(&mut out, &path, head_only),
        Resolved::Redirect(location) => {
            let head = format!(
                "HTTP/1.1 301 Moved Permanently\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            out.write_all(head.as_bytes())
        }
        Resolved::BadRequest => respond(&mut out, 400, "text/plain", b"bad request\n", head_only),
        Resolved::NotFound => respond(&mut out, 404, "text/plain", b"not found\n", head_only),
    }
}

/// Reads the request line and headers (at most `MAX_HEAD_BYTES`); `None` when malformed.
fn read_head(stream: TcpStream) -> io::Result<Option<Request>> {
    let mut reader = BufReader::new(stream.take(MAX_HEAD_BYTES));
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 || !line.ends_with('\n') {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Ok(None);
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(None);
    }
    let request = Request { method: method.to_string(), target: target.to_string() };
    // Headers are read (so the client is not cut off mid-send) but not needed.
    let mut header = String::new();
    loop {
        header.clear();
        if reader.read_line(&mut header)? == 0 || !header.ends_with('\n') {
            return Ok(None);
        }
        if header.trim_end().is_empty() {
            return Ok(Some(request));
        }
    }
}

/// What a request target maps to.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolved {
    File(PathBuf),
    /// A folder asked for without its trailing slash: the same URL with one.
    Redirect(String),
    BadRequest,
    NotFound,
}

/// Maps a request target (`/a/b?x`) to a file inside `root` (canonical). Hidden names, `..`,
/// backslashes, NUL and symlinks that leave `root` are refused; folders serve their index.html.
pub fn resolve(root: &Path, target: &str) -> Resolved {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let Some(path) = path.strip_prefix('/') else { return Resolved::BadRequest };
    let Some(decoded) = percent_decode(path) else { return Resolved::BadRequest };
    if decoded.contains(['\\', '\0']) {
        return Resolved::BadRequest;
    }
    let mut file = root.to_path_buf();
    for segment in decoded.split('/').filter(|s| !s.is_empty()) {
        if segment.starts_with('.') {
            return Resolved::NotFound;
        }
        file.push(segment);
    }
    let Ok(file) = file.canonicalize() else { return Resolved::NotFound };
    if !file.starts_with(root) {
        return Resolved::NotFound;
    }
    if file.is_dir() {
        if !decoded.is_empty() && !decoded.ends_with('/') {
            let query = query.map(|q| format!("?{q}")).unwrap_or_default();
            return Resolved::Redirect(format!("/{path}/{query}"));
        }
        let index = file.join("index.html");
        return if index.is_file() { Resolved::File(index) } else { Resolved::NotFound };
    }
    Resolved::File(file)
}

/// Decodes `%XX` escapes; `None` for a malformed escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The Content-Type of a file, by extension (`application/wasm` lets browsers compile while
/// downloading).
pub fn mime_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "txt" | "md" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

fn send_file(out: &mut TcpStream, path: &Path, head_only: bool) -> io::Result<()> {
    let Ok(mut file) = File::open(path) else {
        return respond(out, 404, "text/plain", b"not found\n", head_only);
    };
    let len = file.metadata()?.len();
    write_head(out, 200, mime_type(path), len)?;
    if !head_only {
        io::copy(&mut file, out)?;
    }
    out.flush()
}

fn respond(out: &mut TcpStream, status: u16, mime: &str, body: &[u8], head_only: bool) -> io::Result<()> {
    write_head(out, status, mime, body.len() as u64)?;
    if !head_only {
        out.write_all(body)?;
    }
    out.flush()
}

/// Status line and headers. Every response closes its connection; `no-cache` makes the browser
/// revalidate, so a rebuilt page is seen on reload (the hashed assets change name anyway).
fn write_head(out: &mut TcpStream, status: u16, mime: &str, len: u64) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {mime}\r\nContent-Length: {len}\r\n\
         Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"
    );
    out.write_all(head.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b").as_deref(), Some("a b"));
        assert_eq!(percent_decode("%2e%2E").as_deref(), Some(".."));
        assert_eq!(percent_decode("%2"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
    }

    #[test]
    fn mime_types() {
        assert_eq!(mime_type(Path::new("a/x_bg.wasm")), "application/wasm");
        assert_eq!(mime_type(Path::new("x.js")), "text/javascript; charset=utf-8");
        assert_eq!(mime_type(Path::new("m/model.safetensors")), "application/octet-stream");
        assert_eq!(mime_type(Path::new("Makefile")), "application/octet-stream");
    }
}
