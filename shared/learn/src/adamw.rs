//! AdamW (decoupled weight decay, Loshchilov & Hutter) written over tch tensors, because tch's
//! optimizers cannot save or restore their state. Moments live as tensors beside the weights
//! and are checkpointed with them, so a resumed run takes exactly the steps it would have taken.

use anyhow::{Result, bail};
use tch::{Kind, Tensor};

use crate::model::Param;

#[derive(Debug)]
pub struct AdamW {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Updates taken so far (the bias-correction exponent).
    pub step: u64,
    pub m: Vec<Tensor>,
    pub v: Vec<Tensor>,
}

impl AdamW {
    pub fn new(params: &[Param], weight_decay: f64) -> AdamW {
        AdamW {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            step: 0,
            m: params.iter().map(|p| p.tensor.zeros_like()).collect(),
            v: params.iter().map(|p| p.tensor.zeros_like()).collect(),
        }
    }

    /// One update with learning rate `lr` from the gradients currently held by `params`.
    pub fn step(&mut self, params: &mut [Param], lr: f64) {
        let _guard = tch::no_grad_guard();
        self.step += 1;
        let t = self.step as i32;
        let bias1 = 1.0 - self.beta1.powi(t);
        let bias2 = 1.0 - self.beta2.powi(t);
        for ((p, m), v) in params.iter_mut().zip(&mut self.m).zip(&mut self.v) {
            let g = p.tensor.grad();
            if !g.defined() {
                continue;
            }
            if p.decay && self.weight_decay > 0.0 {
                let _ = p.tensor.g_mul_scalar_(1.0 - lr * self.weight_decay);
            }
            let _ = m.g_mul_scalar_(self.beta1);
            let _ = m.g_add_(&(&g * (1.0 - self.beta1)));
            let _ = v.g_mul_scalar_(self.beta2);
            let _ = v.g_add_(&(&g * &g * (1.0 - self.beta2)));
            let denom = v.sqrt() / bias2.sqrt() + self.eps;
            let _ = p.tensor.g_add_(&(&*m / denom * (-lr / bias1)));
        }
    }

    /// The global L2 norm of the gradients; when above `max_norm` (> 0) they are scaled down to
    /// it. Returns the norm before clipping.
    pub fn clip_grad_norm(params: &mut [Param], max_norm: f64) -> f64 {
        let _guard = tch::no_grad_guard();
        let squares: Vec<Tensor> = params
            .iter()
            .map(|p| p.tensor.grad())
            .filter(|g| g.defined())
            .map(|g| (&g * &g).sum(Kind::Double))
            .collect();
        if squares.is_empty() {
            return 0.0;
        }
        let norm = Tensor::stack(&squares, 0)
            .sum(Kind::Double)
            .sqrt()
            .double_value(&[]);
        if max_norm > 0.0 && norm > max_norm {
            let scale = max_norm / (norm + 1e-6);
            for p in params.iter_mut() {
                let mut g = p.tensor.grad();
                if g.defined() {
                    let _ = g.g_mul_scalar_(scale);
                }
            }
        }
        norm
    }

    /// The state as named tensors for a checkpoint.
    pub fn named<'a>(&'a self, params: &[Param]) -> Vec<(String, &'a Tensor)> {
        params
            .iter()
            .zip(&self.m)
            .map(|(p, m)| (format!("adamw.m.{}", p.name), m))
            .chain(
                params
                    .iter()
                    .zip(&self.v)
                    .map(|(p, v)| (format!("adamw.v.{}", p.name), v)),
            )
            .collect()
    }

    /// Restores the moments from a checkpoint's tensors and the step count from its record.
    pub fn load(
        &mut self,
        params: &[Param],
        tensors: &[(String, Tensor)],
        step: u64,
        origin: &str,
    ) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (kind, state) in [("m", &mut self.m), ("v", &mut self.v)] {
            for (p, t) in params.iter().zip(state.iter_mut()) {
                let key = format!("adamw.{kind}.{}", p.name);
                let Some((_, src)) = tensors.iter().find(|(n, _)| *n == key) else {
                    bail!("{origin}: has no optimizer tensor `{key}`");
                };
                if src.size() != t.size() {
                    bail!("{origin}: optimizer tensor `{key}` has the wrong shape");
                }
                t.copy_(src);
            }
        }
        self.step = step;
        Ok(())
    }
}
