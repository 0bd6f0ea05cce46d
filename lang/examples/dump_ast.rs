fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let mut engine = rhai::Engine::new();
    engine.set_optimization_level(rhai::OptimizationLevel::Simple);
    let ast = engine.compile(&text).unwrap();
    for f in ast.iter_fn_def() {
        println!("fn {} {:?}\n{:#?}", f.name, f.params, f.body);
    }
}
