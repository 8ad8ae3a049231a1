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
    /// Room for the update's intermediate values: a double per parameter, for the gradient
    /// norm (computed in double), its first half reused as floats by the update. Each
    /// intermediate used to be a new tensor; past glibc's mmap threshold every one was a fresh
    /// mapping whose pages the kernel zeroed on first touch, and on a wide model (85M
    /// parameters) that was three quarters of every step.
    scratch: Tensor,
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
            scratch: model.flat.zeros_like().to_kind(Kind::Double),
        }
    }

    /// The float half of the scratch, one value per parameter.
    fn scratch_f32(&self) -> Tensor {
        self.scratch
            .view_dtype(Kind::Float)
            .narrow(0, 0, self.m.numel() as i64)
    }

    /// One update of `model.flat` with learning rate `lr` from the flat gradient `grad`.
    pub fn step(&mut self, model: &mut Mlp, grad: &Tensor, lr: f64) {
        let _guard = tch::no_grad_guard();
        self.step += 1;
        let t = self.step as i32;
        let bias1 = 1.0 - self.beta1.powi(t);
        let bias2 = 1.0 - self.beta2.powi(t);
        let flat = &mut model.flat;
        // The arithmetic of `m = b1 m + (1 - b1) g` and so on as written out of place (the
        // same kernels, in the same order, so the same bits), each result into the scratch.
        let mut tmp = self.scratch_f32();
        if self.weight_decay > 0.0 {
            let _ = flat.mul_out(&tmp, &self.decay_mask);
            let _ = tmp.g_mul_scalar_(lr * self.weight_decay);
            let _ = flat.g_sub_(&tmp);
        }
        let _ = self.m.g_mul_scalar_(self.beta1);
        let _ = grad.mul_scalar_out(&tmp, 1.0 - self.beta1);
        let _ = self.m.g_add_(&tmp);
        let _ = self.v.g_mul_scalar_(self.beta2);
        let _ = grad.mul_out(&tmp, grad);
        let _ = tmp.g_mul_scalar_(1.0 - self.beta2);
        let _ = self.v.g_add_(&tmp);
        let _ = self.v.sqrt_out(&tmp);
        let _ = tmp.g_div_scalar_(bias2.sqrt());
        let _ = tmp.g_add_scalar_(self.eps);
        let _ = self.m.div_out(&tmp, &tmp);
        let _ = tmp.g_mul_scalar_(-lr / bias1);
        let _ = flat.g_add_(&tmp);
    }

    /// The L2 norm of `grad` (in double); when above `max_norm` (> 0) it is scaled down to it
    /// in place. Returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, grad: &mut Tensor, max_norm: f64) -> f64 {
        let _guard = tch::no_grad_guard();
        let norm = if grad.size() == self.scratch.size() {
            self.scratch.copy_(grad);
            self.scratch.norm().double_value(&[])
        } else {
            grad.to_kind(Kind::Double).norm().double_value(&[])
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Architecture;
    use tch::Device;

    /// The update as first written, every intermediate a new tensor: the in-place one must give
    /// the same bits, or the weights of a seed would change.
    fn step_out_of_place(opt: &mut AdamW, flat: &mut Tensor, grad: &Tensor, lr: f64) {
        let _guard = tch::no_grad_guard();
        opt.step += 1;
        let t = opt.step as i32;
        let (bias1, bias2) = (1.0 - opt.beta1.powi(t), 1.0 - opt.beta2.powi(t));
        if opt.weight_decay > 0.0 {
            let decay = &*flat * &opt.decay_mask * (lr * opt.weight_decay);
            let _ = flat.g_sub_(&decay);
        }
        let _ = opt.m.g_mul_scalar_(opt.beta1);
        let _ = opt.m.g_add_(&(grad * (1.0 - opt.beta1)));
        let _ = opt.v.g_mul_scalar_(opt.beta2);
        let _ = opt.v.g_add_(&(grad * grad * (1.0 - opt.beta2)));
        let denom = opt.v.sqrt() / bias2.sqrt() + opt.eps;
        let _ = flat.g_add_(&(&opt.m / denom * (-lr / bias1)));
    }

    #[test]
    fn the_in_place_update_and_norm_give_the_bits_of_the_out_of_place_ones() {
        let arch = Architecture {
            numeric: 7,
            cardinalities: vec![5],
            embedding_dim: 3,
            hidden: vec![33, 9],
            dropout: 0.0,
        };
        let mut model = Mlp::new(arch.clone(), 3, Device::Cpu);
        let mut flat = model.flat.copy();
        let mut ours = AdamW::new(&model, 0.01);
        let mut theirs = AdamW::new(&model, 0.01);
        for step in 0..5 {
            let grad = Tensor::randn(model.flat.size(), (Kind::Float, Device::Cpu)) * 3.0;
            let mut g_ours = grad.copy();
            let norm = ours.clip_grad_norm(&mut g_ours, 1.0);
            let expected = grad.to_kind(Kind::Double).norm().double_value(&[]);
            assert_eq!(norm.to_bits(), expected.to_bits(), "step {step}: the norm");
            let g_theirs = &grad * (1.0 / (expected + 1e-6));
            ours.step(&mut model, &g_ours, 0.01);
            step_out_of_place(&mut theirs, &mut flat, &g_theirs, 0.01);
            assert!(model.flat.equal(&flat), "step {step}: the weights");
            assert!(
                ours.m.equal(&theirs.m) && ours.v.equal(&theirs.v),
                "step {step}: the moments"
            );
        }
    }
}
