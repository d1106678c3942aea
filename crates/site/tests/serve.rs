//! `attnlab-site serve` as a process: MIME types, folders, and requests that try to leave the site.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The server process, killed when the test ends (also on a failed assertion).
struct Served {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A small site (page, wasm, a model folder, a hidden file) and a server on a free port.
fn serve_site(name: &str) -> Served {
    let dir = std::env::temp_dir().join(format!("attnlab-site-serve-{name}-{}", std::process::id()));
    let site = dir.join("site");
    fs::create_dir_all(site.join("models/m")).expect("temp dir");
    fs::write(site.join("index.html"), "<!doctype html><p>page</p>").expect("write");
    fs::write(site.join("app_bg.wasm"), b"\0asm\x01\0\0\0").expect("write");
    fs::write(site.join("models/m/config.json"), "{}").expect("write");
    fs::write(site.join(".attnlab-site"), "marker").expect("write");
    fs::write(dir.join("secret.txt"), "outside the site").expect("write");

    let mut child = Command::new(env!("CARGO_BIN_EXE_attnlab-site"))
        .args(["serve", "--port", "0", "--dist"])
        .arg(&site)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start attnlab-site serve");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout pipe");
    BufReader::new(stdout).read_line(&mut line).expect("first line");
    let addr = line.split("http://").nth(1).and_then(|rest| rest.split('/').next()).map(str::to_string);
    let served = Served { child, addr: addr.unwrap_or_default(), dir };
    assert!(!served.addr.is_empty(), "no address in {line:?}");
    served
}

/// Sends one raw request; returns (status code, headers + body as text).
fn request(addr: &str, raw: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.write_all(raw.as_bytes()).expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read response");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
}

#[test]
fn serves_files_with_their_types_and_folders_with_index_html() {
    let s = serve_site("types");
    let (status, page) = get(&s.addr, "/");
    assert_eq!(status, 200);
    assert!(page.contains("Content-Type: text/html; charset=utf-8") && page.ends_with("<p>page</p>"));
    let (status, wasm) = get(&s.addr, "/app_bg.wasm?v=1");
    assert_eq!(status, 200);
    assert!(wasm.contains("Content-Type: application/wasm\r\n") && wasm.contains("Content-Length: 8\r\n"));
    let (status, json) = get(&s.addr, "/models/m/config.json");
    assert_eq!(status, 200);
    assert!(json.contains("Content-Type: application/json\r\n"));
    let (status, head) = request(&s.addr, "HEAD /models/m/config.json HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head:?}");
    let (status, redirect) = get(&s.addr, "/models?model=m");
    assert_eq!(status, 301);
    assert!(redirect.contains("Location: /models/?model=m\r\n"));
    assert_eq!(get(&s.addr, "/models/").0, 404, "no folder listings");
    assert_eq!(get(&s.addr, "/missing.js").0, 404);
}

#[test]
fn refuses_paths_outside_the_site_hidden_files_and_other_methods() {
    let s = serve_site("escape");
    for path in ["/../secret.txt", "/%2e%2e/secret.txt", "/models/..%2f..%2fsecret.txt", "/.attnlab-site"] {
        let (status, body) = get(&s.addr, path);
        assert_eq!(status, 404, "{path}");
        assert!(!body.contains("outside the site"), "{path}");
    }
    assert_eq!(get(&s.addr, "/a%5c..%5csecret.txt").0, 400, "backslashes");
    assert_eq!(get(&s.addr, "/%zz").0, 400, "bad escape");
    assert_eq!(get(&s.addr, "relative").0, 400);
    assert_eq!(request(&s.addr, "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").0, 405);
    assert_eq!(request(&s.addr, "GET / SPDY/3\r\n\r\n").0, 400);
    // An endless header is cut off at the head limit (the client may see a reset while it still
    // sends), and the server keeps serving.
    let mut stream = TcpStream::connect(&s.addr).expect("connect");
    let _ = stream.write_all(format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(256 * 1024)).as_bytes());
    drop(stream);
    assert_eq!(get(&s.addr, "/").0, 200);
}
