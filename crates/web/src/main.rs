//! Entry point that trunk links into the page (`data-bin="attnlab-web"`).

#[cfg(target_arch = "wasm32")]
fn main() {
    attnlab_web::run();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!(
        "attnlab-web is a browser app: build it with `trunk build` (or run ./scripts/serve.sh); \
         use the `attnlab` CLI on the command line"
    );
    std::process::exit(2);
}
