fn main() {
    for dir in std::env::args().skip(1) {
        let app = pure_lang::App::load(std::path::Path::new(&dir)).unwrap();
        for r in app.routes() {
            println!("{dir} {} {:?}", r.handler, app.execution(&r.handler));
        }
    }
}
