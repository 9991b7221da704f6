"""grpo_train.py: GRPO post-training of a tiny policy language model on CPU,
data-parallel over gloo, recorded with stepscope's RL phases and batch.

    stepscope run -n 4 -- python3 examples/grpo_train.py
    stepscope run -n 4 -- python3 examples/grpo_train.py --long-rank 2
    stepscope run -n 4 -- python3 examples/grpo_train.py --constant-reward-step 10
    stepscope run -n 4 -- python3 examples/grpo_train.py --lr-blowup-step 15
    stepscope report

The task is verifiable: a prompt "a+b=" (a, b in 0..2) is answered by the
digit of the sum and the end token; the reward is 1 for exactly that
completion, else 0.  The policy (a causal language model over its last 6
tokens: embeddings and two hidden layers, a 14-token vocabulary) starts from a short supervised warm-up
that teaches the answer's form (a digit, then the end token) with random
digits: it knows the format, not the arithmetic.  Each step, per rank:

  rollout      sample GROUP completions per prompt from the rollout copy
               of the policy, with a temperature and a maximum length;
               every decoding step also sleeps --decode-ms, standing in
               for a large model's per-token time
  reward       exact-match rewards, group-relative advantages
               (reward - group mean) / (group std + 1e-4)
  reference    log-probabilities of the frozen reference copy
  update       --inner updates of the clipped policy-gradient loss with a
               KL penalty (TRL's k3 estimator) to the reference; DDP
               averages the gradients
  weight_sync  the updated weights copied into the rollout copy

stepscope.rl_batch records the rewards, lengths, group size and
advantages; stepscope.metric the statistics under TRL's names (kl,
entropy, clip_ratio/region_mean, completions/mean_length, reward,
reward_std, frac_reward_zero_std).

Switches (each a problem docs/rl.md shows found):
  --long-rank R             rank R's sampler never emits the end token
                            (a wrong end-token id) and runs to
                            --long-max-len tokens
  --constant-reward-step S  from step S the reward is 1 for everything
  --lr-blowup-step S        from step S the learning rate is multiplied
                            by --lr-blowup
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import stepscope

VOCAB, PLUS, EQ, EOS, BOS = 14, 10, 11, 12, 13
OPERANDS = 3  # a and b in 0..OPERANDS-1


class Policy(torch.nn.Module):
    """A causal language model over the last CONTEXT tokens: their
    embeddings, concatenated, through two hidden layers."""
    CONTEXT = 6

    def __init__(self, dim=16, hidden=64):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB + 1, dim)  # + padding
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(self.CONTEXT * dim, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, VOCAB))

    def forward(self, tokens):
        """Next-token logits at every position of TOKENS (n x L)."""
        pad = torch.full((tokens.shape[0], self.CONTEXT - 1), VOCAB,
                         dtype=tokens.dtype)
        windows = torch.cat([pad, tokens], 1).unfold(1, self.CONTEXT, 1)
        e = self.embed(windows)  # n x L x CONTEXT x dim
        return self.mlp(e.flatten(2))


def prompts(gen, n):
    a = torch.randint(0, OPERANDS, (n,), generator=gen)
    b = torch.randint(0, OPERANDS, (n,), generator=gen)
    toks = torch.stack([torch.full_like(a, BOS), a, torch.full_like(a, PLUS),
                        b, torch.full_like(a, EQ)], 1)
    return toks, a + b


@torch.no_grad()
def sample(model, prompt, max_len, temperature, never_stop, decode_ms, gen):
    """Completions of PROMPT (n x 5): tokens (n x the longest completion,
    EOS-padded) and lengths (tokens up to and including the end token).
    With NEVER_STOP the end token is never sampled (as with a wrong
    end-token id), so every completion runs to MAX_LEN."""
    n = prompt.shape[0]
    seq = prompt
    out = torch.full((n, max_len), EOS, dtype=torch.long)
    lengths = torch.full((n,), max_len, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    for t in range(max_len):
        z = model(seq[:, -Policy.CONTEXT:])[:, -1] / temperature
        if never_stop:
            z[:, EOS] = float("-inf")
        tok = torch.multinomial(F.softmax(z, -1), 1, generator=gen)[:, 0]
        tok = torch.where(done, torch.full_like(tok, EOS), tok)
        out[:, t] = tok
        ended = (tok == EOS) & ~done
        lengths[ended] = t + 1
        done |= ended
        if decode_ms > 0:
            time.sleep(decode_ms / 1000.0)
        if bool(done.all()):
            break
        seq = torch.cat([seq, tok[:, None]], 1)
    return out[:, :int(lengths.max())], lengths


def token_logprobs(model, prompt, comp):
    """Per-token log-probabilities of COMP after PROMPT, and the entropy
    of each of those distributions."""
    seq = torch.cat([prompt, comp[:, :-1]], 1)
    logits = model(seq)[:, prompt.shape[1] - 1:]
    logp = F.log_softmax(logits, -1)
    tok = logp.gather(2, comp[:, :, None])[:, :, 0]
    ent = -(logp.exp() * logp).sum(-1)
    return tok, ent


def rewards_of(comp, lengths, answers, constant):
    if constant:
        return torch.ones(comp.shape[0])
    right = (lengths == 2) & (comp[:, 0] == answers)
    return right.float()


def warm_up(model, steps, gen, lr=1e-2):
    """Teaches the form of an answer (a digit, then the end token), with
    random digits: the same on every rank (same seed)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        prompt, _ = prompts(gen, 64)
        digit = torch.randint(0, 10, (64,), generator=gen)
        comp = torch.stack([digit, torch.full_like(digit, EOS)], 1)
        tok, _ = token_logprobs(model, prompt, comp)
        loss = -tok.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=4, help="per rank")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--beta", type=float, default=0.04, help="KL weight")
    ap.add_argument("--clip", type=float, default=0.2)
    ap.add_argument("--inner", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-len", type=int, default=4)
    ap.add_argument("--decode-ms", type=float, default=1.0)
    ap.add_argument("--warmup-steps", type=int, default=40)
    ap.add_argument("--long-rank", type=int, default=-1)
    ap.add_argument("--long-max-len", type=int, default=24)
    ap.add_argument("--constant-reward-step", type=int, default=-1)
    ap.add_argument("--lr-blowup-step", type=int, default=-1)
    ap.add_argument("--lr-blowup", type=float, default=3.0)
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    policy = Policy()
    warm_up(policy, args.warmup_steps, torch.Generator().manual_seed(1))
    reference = Policy()
    reference.load_state_dict(policy.state_dict())
    reference.requires_grad_(False)
    sampler = Policy()
    sampler.load_state_dict(policy.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(policy)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(100 + rank)
    long_rank = rank == args.long_rank
    max_len = args.long_max_len if long_rank else args.max_len

    for step in range(args.steps):
        if step == args.lr_blowup_step:
            for g in opt.param_groups:
                g["lr"] = args.lr * args.lr_blowup
        with stepscope.step():
            with stepscope.phase("rollout"):
                prompt, answers = prompts(gen, args.prompts)
                prompt = prompt.repeat_interleave(args.group, 0)
                answers = answers.repeat_interleave(args.group, 0)
                comp, lengths = sample(sampler, prompt, max_len,
                                       args.temperature, long_rank,
                                       args.decode_ms, gen)
            with stepscope.phase("reward"):
                constant = 0 <= args.constant_reward_step <= step
                r = rewards_of(comp, lengths, answers, constant)
                grouped = r.view(-1, args.group)
                adv = ((grouped - grouped.mean(1, keepdim=True)) /
                       (grouped.std(1, keepdim=True, unbiased=False) + 1e-4)
                       ).view(-1)
                stepscope.rl_batch(r, lengths, args.group, adv)
            mask = (torch.arange(comp.shape[1])[None, :] <
                    lengths[:, None]).float()
            ntok = mask.sum()
            with stepscope.phase("reference"), torch.no_grad():
                ref_logp, _ = token_logprobs(reference, prompt, comp)
                old_logp, _ = token_logprobs(policy, prompt, comp)
            with stepscope.phase("update"):
                for _ in range(args.inner):
                    logp, ent = token_logprobs(ddp, prompt, comp)
                    ratio = torch.exp(logp - old_logp)
                    a = adv[:, None]
                    pg = -torch.min(ratio * a, torch.clamp(
                        ratio, 1 - args.clip, 1 + args.clip) * a)
                    d = ref_logp - logp
                    kl = torch.exp(d) - d - 1
                    loss = ((pg + args.beta * kl) * mask).sum() / ntok
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                clipped = ((ratio < 1 - args.clip) | (ratio > 1 + args.clip)
                           ).float()
            with stepscope.phase("weight_sync"):
                sampler.load_state_dict(policy.state_dict())
            zero_std = (grouped.std(1, unbiased=False) == 0).float().mean()
            stepscope.metric("kl", float((kl * mask).sum() / ntok))
            stepscope.metric("entropy", float((ent * mask).sum() / ntok))
            stepscope.metric("clip_ratio/region_mean",
                             float((clipped * mask).sum() / ntok))
            stepscope.metric("completions/mean_length",
                             float(lengths.float().mean()))
            stepscope.metric("reward", float(r.mean()))
            stepscope.metric("reward_std", float(r.std(unbiased=False)))
            stepscope.metric("frac_reward_zero_std", float(zero_std))
            if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
                print("step %d reward %.3f kl %.4f entropy %.3f "
                      "mean_length %.2f" % (step, float(r.mean()),
                                            float((kl * mask).sum() / ntok),
                                            float((ent * mask).sum() / ntok),
                                            float(lengths.float().mean())),
                      flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
