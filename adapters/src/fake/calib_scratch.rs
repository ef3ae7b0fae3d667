#[cfg(test)]
mod t {
    #[derive(PartialEq, Clone, Copy, Debug)]
    enum K { S, L, D, P, N }
    fn count(text: &str, letters: u64, punct: u64, absorb: bool, camel: bool) -> u64 {
        let mut prevc = ' ';
        // collect runs
        let mut runs: Vec<(K, u64)> = vec![];
        for c in text.chars() {
            let k = if c.is_alphabetic() || c == '_' { K::L } else if c.is_ascii_digit() { K::D } else if c == '\n' { K::N } else if c.is_whitespace() { K::S } else { K::P };
            let split = camel && c.is_ascii_uppercase() && prevc.is_ascii_lowercase(); prevc = c;
            match runs.last_mut() { Some((lk, r)) if *lk == k && !split => *r += 1, _ => runs.push((k, 1)) }
        }
        let mut n = 0;
        for (i, &(k, r)) in runs.iter().enumerate() {
            let prev = if i > 0 { Some(runs[i-1].0) } else { None };
            n += match k {
                K::S => 0,
                K::L => r.div_ceil(letters),
                K::D => r.div_ceil(3),
                K::P => r.div_ceil(punct),
                K::N => if absorb && prev == Some(K::P) { 0 } else { 1 },
            };
        }
        n
    }
    #[test]
    #[ignore]
    fn scratch() {
        let prose = include_str!("testdata/prose.txt");
        let code = include_str!("testdata/code.rs.txt");
        let types = include_str!("../types.rs");
        let est = include_str!("../estimate.rs");
        let cl = |t: &str| crate::estimate::count_text_with(crate::estimate::EstimatorKind::Cl100kBase, t);
        println!("cl100k prose {} code {} types {}", cl(prose), cl(code), cl(types));
        for letters in [8u64, 9, 10, 12] {
          for punct in [2u64] {
            for absorb in [false, true] {
                let r = |t: &str| count(t, letters, punct, absorb, true) as f64 / cl(t) as f64;
                println!("L={letters} P={punct} absorb={absorb}: prose {:.3} code {:.3} types {:.3} est {:.3}", r(prose), r(code), r(types), r(est));
            }
          }
        }
    }
}
