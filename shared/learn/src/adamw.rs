//! AdamW (decoupled weight decay, Loshchilov & Hutter) written over tch tensors, because tch's
//! optimizers cannot save or restore their state. It works on the model's flat parameter
//! buffer, so one update is about ten kernels whatever the number of layers. The moments are
//! checkpointed beside the weights (split by parameter name), so a resumed run takes exactly
//! the steps it would have taken.

use anyhow::{Result, bail};
use tch::{Kind, Tensor};

use crate::model::Mlp;

#[derive(Debug)]
pub struct AdamW {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Updates taken so far (the bias-correction exponent).
    pub step: u64,
    pub m: Tensor,
    pub v: Tensor,
    decay_mask: Tensor,
}

impl AdamW {
    pub fn new(model: &Mlp, weight_decay: f64) -> AdamW {
        AdamW {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            step: 0,
            m: model.flat.zeros_like(),
            v: model.flat.zeros_like(),
            decay_mask: model.decay_mask(),
        }
    }

    /// One update of `model.flat` with learning rate `lr` from the flat gradient `grad`.
    pub fn step(&mut self, model: &mut Mlp, grad: &Tensor, lr: f64) {
        let _guard = tch::no_grad_guard();
        self.step += 1;
        let t = self.step as i32;
        let bias1 = 1.0 - self.beta1.powi(t);
        let bias2 = 1.0 - self.beta2.powi(t);
        let flat = &mut model.flat;
        if self.weight_decay > 0.0 {
            let decay = &*flat * &self.decay_mask * (lr * self.weight_decay);
            let _ = flat.g_sub_(&decay);
        }
        let _ = self.m.g_mul_scalar_(self.beta1);
        let _ = self.m.g_add_(&(grad * (1.0 - self.beta1)));
        let _ = self.v.g_mul_scalar_(self.beta2);
        let _ = self.v.g_add_(&(grad * grad * (1.0 - self.beta2)));
        let denom = self.v.sqrt() / bias2.sqrt() + self.eps;
        let _ = flat.g_add_(&(&self.m / denom * (-lr / bias1)));
    }

    /// The L2 norm of `grad`; when above `max_norm` (> 0) it is scaled down to it in place.
    /// Returns the norm before clipping.
    pub fn clip_grad_norm(grad: &mut Tensor, max_norm: f64) -> f64 {
        let _guard = tch::no_grad_guard();
        let norm = grad.to_kind(Kind::Double).norm().double_value(&[]);
        if max_norm > 0.0 && norm > max_norm {
            let _ = grad.g_mul_scalar_(max_norm / (norm + 1e-6));
        }
        norm
    }

    /// The moments as named per-parameter views, for a checkpoint.
    pub fn named(&self, model: &Mlp) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (kind, state) in [("m", &self.m), ("v", &self.v)] {
            for p in &model.params {
                out.push((
                    format!("adamw.{kind}.{}", p.name),
                    state
                        .narrow(0, p.offset, p.numel)
                        .view(p.tensor.size().as_slice()),
                ));
            }
        }
        out
    }

    /// Restores the moments from a checkpoint's tensors and the step count from its record.
    pub fn load(
        &mut self,
        model: &Mlp,
        tensors: &[(String, Tensor)],
        step: u64,
        origin: &str,
    ) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (kind, state) in [("m", &mut self.m), ("v", &mut self.v)] {
            for p in &model.params {
                let key = format!("adamw.{kind}.{}", p.name);
                let Some((_, src)) = tensors.iter().find(|(n, _)| *n == key) else {
                    bail!("{origin}: has no optimizer tensor `{key}`");
                };
                if src.size() != p.tensor.size() {
                    bail!("{origin}: optimizer tensor `{key}` has the wrong shape");
                }
                state
                    .narrow(0, p.offset, p.numel)
                    .copy_(&src.reshape([-1]).to_device(state.device()));
            }
        }
        self.step = step;
        Ok(())
    }
}
