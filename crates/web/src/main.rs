//! Entry point of the page's wasm module (`attnlab-site build` compiles this binary).

#[cfg(target_arch = "wasm32")]
fn main() {
    attnlab_web::run();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!(
        "attnlab-web is a browser app: build it with `cargo run -p attnlab-site -- build` (or run ./scripts/serve.sh); \
         use the `attnlab` CLI on the command line"
    );
    std::process::exit(2);
}
