"""Reference cases: matmul, embedding, attention and the shape ops (reshape, transpose,
permute, concat, slice), forward and backward, f32."""
import math

import torch
from oracle import fwd_bwd  # noqa: E402
from trainer_rng import dropout_keep  # noqa: E402


_fwd_bwd = fwd_bwd


def _attention(q, k, v, n_head, causal):
    """Multi-head attention on (B, T, C) / (B, S, C), written out (torch 1.13 has no
    F.scaled_dot_product_attention). The causal mask is tril of (T, S) aligned top-left, as
    scaled_dot_product_attention(is_causal=True) does."""
    B, T, C = q.shape
    S = k.shape[1]
    D = C // n_head
    qh = q.reshape(B, T, n_head, D).transpose(1, 2)
    kh = k.reshape(B, S, n_head, D).transpose(1, 2)
    vh = v.reshape(B, S, n_head, D).transpose(1, 2)
    scores = qh @ kh.transpose(-2, -1) / math.sqrt(D)
    if causal:
        keep = torch.ones(T, S, dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ vh
    return y.transpose(1, 2).reshape(B, T, C)


def _attention_masked(q, k, v, mask, n_head, causal, p=0.0):
    """_attention with a key padding mask (B, S), nonzero = attended (Hugging Face's
    attention_mask), composed with the causal mask. A query that sees no key gets zeros and no
    gradient: its scores are set to 0 before the softmax (no NaN) and its probabilities
    multiplied by the (all false) mask row. p > 0: dropout on the probabilities with the mask
    tr_attention_dropout draws in the C test's graph (seed 1234, step 0, its first dropout
    call, sample_base 0), kept ones scaled by 1 / (1 - p)."""
    B, T, C = q.shape
    S = k.shape[1]
    D = C // n_head
    qh = q.reshape(B, T, n_head, D).transpose(1, 2)
    kh = k.reshape(B, S, n_head, D).transpose(1, 2)
    vh = v.reshape(B, S, n_head, D).transpose(1, 2)
    scores = qh @ kh.transpose(-2, -1) / math.sqrt(D)
    keep = (mask != 0).reshape(B, 1, 1, S).expand(B, n_head, T, S)
    if causal:
        keep = keep & torch.ones(T, S, dtype=torch.bool).tril()
    seen = keep.any(-1, keepdim=True)
    scores = scores.masked_fill(~keep, float("-inf")).masked_fill(~seen, 0.0)
    att = torch.softmax(scores, dim=-1) * keep
    if p > 0:
        drop = dropout_keep(p, att.numel(), seed=1234, step=0, call=0, first=0).reshape(att.shape)
        att = att * drop.to(att.dtype) / (1 - p)
    y = att @ vh
    return y.transpose(1, 2).reshape(B, T, C)


def _pad_mask(B, S, lengths, left):
    """(B, S) int32: 1 on the first (or, left, the last) lengths[b] positions of each row."""
    m = torch.zeros(B, S, dtype=torch.int32)
    for b, n in enumerate(lengths):
        if left:
            m[b, S - n:] = 1
        else:
            m[b, :n] = 1
    return m


def cases():
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g)

    # matmul
    yield "matmul_batched", _fwd_bwd(lambda a, b: a @ b,
                                     dict(a=rnd(2, 3, 4, 5), b=rnd(2, 3, 5, 6)), 1)
    yield "matmul_shared", _fwd_bwd(lambda a, b: a @ b, dict(a=rnd(2, 3, 4, 5), b=rnd(5, 6)), 2)
    # per-batch GEMMs above 65536*4 multiply-adds: the one-after-another path
    yield "matmul_batched_large", _fwd_bwd(lambda a, b: a @ b,
                                           dict(a=rnd(2, 64, 80), b=rnd(2, 80, 64)), 18)
    yield "matmul_2d", _fwd_bwd(lambda a, b: a @ b, dict(a=rnd(7, 5), b=rnd(5, 3)), 3)

    # embedding: ids repeat (id 2 three times, 5 twice), ids are int32 as the C side takes
    ids = torch.tensor([[2, 0, 5, 2], [6, 2, 5, 1], [3, 3, 0, 4]], dtype=torch.int32)
    yield "embedding", _fwd_bwd(
        lambda ids, table: torch.nn.functional.embedding(ids.long(), table),
        dict(ids=ids, table=rnd(7, 6)), 4)

    # more than 32768 elements (TR_PAR_MIN): the OpenMP paths of the kernels
    yield "embedding_large", _fwd_bwd(
        lambda ids, table: torch.nn.functional.embedding(ids.long(), table),
        dict(ids=torch.randint(0, 50, (8, 64), generator=g, dtype=torch.int32),
             table=rnd(50, 80)), 14)

    # attention: (name, B, T, S, C, n_head, causal)
    for name, B, T, S, C, nh, causal in [
        ("attention_h4", 2, 6, 6, 16, 4, 0),
        ("attention_causal_h4", 2, 6, 6, 16, 4, 1),
        ("attention_h1", 2, 5, 5, 8, 1, 0),
        ("attention_causal_h1", 2, 5, 5, 8, 1, 1),
        ("attention_cross_h4", 2, 5, 7, 16, 4, 0),   # T < S
        ("attention_cross_h1", 3, 7, 4, 8, 1, 0),    # T > S
        ("attention_cross_causal_h4", 2, 5, 7, 16, 4, 1),
        ("attention_cross_causal_h2", 2, 7, 4, 8, 2, 1),
        # a long sequence (T*S > 32768: OpenMP threads the softmax rows where the heads run
        # one after another, as on 1 thread; on 2 threads B*NH = 2 heads run in parallel)
        ("attention_long_causal", 1, 192, 192, 32, 2, 1),
        # query rows in several blocks (ops/attention.c: 16 rows of 2100 keys), heads of 40
        # (the product's columns in a tile of 32 and one of 8)
        ("attention_blocks_causal", 1, 40, 2100, 32, 2, 1),
        ("attention_wide_heads", 2, 30, 26, 80, 2, 1),
        # the softmax's rows: two at a time in registers (up to 128 keys; T 7: an odd last row
        # alone, in memory), or in memory (200 and 300 keys)
        ("attention_rows_128", 1, 7, 128, 32, 2, 0),
        ("attention_rows_200", 1, 7, 200, 32, 2, 0),
        ("attention_rows_300", 1, 7, 300, 32, 2, 0),
    ]:
        yield name, _fwd_bwd(lambda q, k, v: _attention(q, k, v, nh, causal),
                             dict(q=rnd(B, T, C), k=rnd(B, S, C), v=rnd(B, S, C)), 5)

    # attention on one fused projection (B, T, 3C): q, k, v its thirds (tr_attention_qkv)
    for name, B, T, C, nh, causal in [
        ("attention_qkv_h4", 2, 6, 16, 4, 0),
        ("attention_qkv_causal_h2", 2, 7, 8, 2, 1),
        ("attention_qkv_long_causal", 1, 192, 32, 2, 1),  # a long sequence, as above
    ]:
        yield name, _fwd_bwd(lambda qkv: _attention(*qkv.chunk(3, dim=-1), nh, causal),
                             dict(qkv=rnd(B, T, 3 * C)), 5)

    # padding: id -1 is a zero row with no gradient (torch: the rows of the clamped ids times
    # the padding mask, so the gradient of a padded position reaches no row)
    pids = torch.tensor([[2, 0, 5, -1, -1], [-1, -1, 6, 2, 0], [-1, -1, -1, -1, -1]], dtype=torch.int32)
    yield "embedding_padding", _fwd_bwd(
        lambda ids, table: torch.nn.functional.embedding(ids.long().clamp(min=0), table)
        * (ids >= 0).unsqueeze(-1).to(table.dtype),
        dict(ids=pids, table=rnd(7, 6)), 19)

    # key padding masks: right and left padding, a fully padded sample, causal + padding,
    # cross attention (T != S); (name, B, T, S, C, n_head, causal, lengths, left)
    for name, B, T, S, C, nh, causal, lengths, left in [
        ("attention_masked_right", 3, 6, 6, 16, 4, 0, [6, 4, 1], False),
        ("attention_masked_left", 3, 6, 6, 16, 4, 0, [6, 4, 1], True),
        ("attention_masked_empty", 3, 5, 5, 8, 2, 0, [5, 0, 3], False),
        ("attention_masked_causal_right", 3, 6, 6, 16, 2, 1, [6, 3, 0], False),
        ("attention_masked_causal_left", 3, 6, 6, 16, 2, 1, [6, 3, 2], True),
        ("attention_masked_cross", 2, 4, 7, 8, 1, 0, [5, 2], False),
        ("attention_masked_cross_causal", 2, 7, 4, 8, 2, 1, [3, 2], True),
        # long rows (the OpenMP paths, as attention_long_causal)
        ("attention_masked_long_causal", 2, 160, 160, 32, 2, 1, [160, 97], False),
        ("attention_masked_blocks", 2, 40, 2100, 16, 2, 0, [2100, 1300], True),
    ]:
        yield name, _fwd_bwd(lambda q, k, v, mask: _attention_masked(q, k, v, mask, nh, causal),
                             dict(q=rnd(B, T, C), k=rnd(B, S, C), v=rnd(B, S, C),
                                  mask=_pad_mask(B, S, lengths, left)), 20)
    for name, B, T, C, nh, causal, lengths, left in [
        ("attention_qkv_masked_right", 3, 6, 16, 4, 0, [6, 4, 1], False),
        ("attention_qkv_masked_causal_left", 3, 7, 8, 2, 1, [7, 5, 0], True),
    ]:
        yield name, _fwd_bwd(lambda qkv, mask: _attention_masked(*qkv.chunk(3, dim=-1), mask, nh, causal),
                             dict(qkv=rnd(B, T, 3 * C), mask=_pad_mask(B, T, lengths, left)), 21)

    # mean pooling over the real positions (sentence-transformers): sum(x mask) / max(n, 1e-9)
    def mean_pool(x, mask):
        m = mask.unsqueeze(-1).to(x.dtype)
        return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
    yield "mean_masked", _fwd_bwd(mean_pool, dict(x=rnd(4, 6, 5),
                                                   mask=_pad_mask(4, 6, [6, 3, 0, 2], False)), 22)
    lm = _pad_mask(2, 5, [4, 1], True)
    yield "mean_masked_left", _fwd_bwd(mean_pool, dict(x=rnd(2, 5, 3), mask=lm), 23)

    # reshape (a view in C) composed with a copy op, so the gradient passes through the view
    yield "reshape_transpose", _fwd_bwd(lambda x: x.reshape(2, -1, 3).transpose(0, 2),
                                        dict(x=rnd(4, 6)), 6)

    # transpose / permute
    yield "transpose_3d", _fwd_bwd(lambda x: x.transpose(0, 2), dict(x=rnd(3, 4, 5)), 7)
    yield "transpose_4d", _fwd_bwd(lambda x: x.transpose(1, 3), dict(x=rnd(2, 3, 4, 5)), 8)
    yield "permute_3d", _fwd_bwd(lambda x: x.permute(2, 0, 1), dict(x=rnd(3, 4, 5)), 9)
    yield "permute_4d", _fwd_bwd(lambda x: x.permute(0, 2, 3, 1), dict(x=rnd(2, 3, 4, 5)), 10)
    yield "permute_large", _fwd_bwd(lambda x: x.permute(0, 2, 3, 1), dict(x=rnd(4, 12, 32, 24)),
                                    15)

    # concat of 3 inputs along dims 0 and 1
    yield "concat_dim0", _fwd_bwd(lambda a, b, c: torch.cat([a, b, c], 0),
                                  dict(a=rnd(2, 3, 4), b=rnd(1, 3, 4), c=rnd(3, 3, 4)), 11)
    yield "concat_dim1", _fwd_bwd(lambda a, b, c: torch.cat([a, b, c], 1),
                                  dict(a=rnd(2, 1, 4), b=rnd(2, 3, 4), c=rnd(2, 2, 4)), 12)

    yield "concat_large", _fwd_bwd(lambda a, b, c: torch.cat([a, b, c], 1),
                                   dict(a=rnd(16, 40, 20), b=rnd(16, 50, 20), c=rnd(16, 30, 20)),
                                   16)

    # slice along a middle dim
    yield "slice_mid", _fwd_bwd(lambda x: x[:, 2:5, :], dict(x=rnd(3, 7, 4)), 13)
    yield "slice_large", _fwd_bwd(lambda x: x[:, 10:40, :], dict(x=rnd(40, 50, 30)), 17)

    # dropout on the attention probabilities (tr_attention_dropout, tr_attention_qkv_dropout),
    # the mask rebuilt from the core's Philox stream: (name, B, T, S, C, n_head, causal,
    # lengths (None: no key padding), left, p)
    for name, B, T, S, C, nh, causal, lengths, left, p in [
        ("attention_dropout_h4", 2, 6, 6, 16, 4, 0, None, False, 0.3),
        ("attention_dropout_cross_causal", 2, 5, 7, 8, 2, 1, None, False, 0.5),
        ("attention_dropout_masked", 3, 6, 6, 16, 4, 0, [6, 4, 0], False, 0.1),
        ("attention_dropout_masked_causal_left", 3, 7, 5, 8, 2, 1, [5, 3, 2], True, 0.3),
        # long rows: the OpenMP paths (rows threaded, or heads, as attention_long_causal)
        ("attention_dropout_long", 1, 192, 192, 32, 1, 0, [150], False, 0.2),
        ("attention_dropout_long_heads", 2, 96, 96, 32, 2, 1, [96, 70], True, 0.2),
        ("attention_dropout_blocks", 1, 40, 2100, 16, 2, 1, [1900], False, 0.3),
    ]:
        mask = _pad_mask(B, S, lengths, left) if lengths else torch.ones(B, S, dtype=torch.int32)
        yield name, _fwd_bwd(lambda q, k, v, mask: _attention_masked(q, k, v, mask, nh, causal, p),
                             dict(q=rnd(B, T, C), k=rnd(B, S, C), v=rnd(B, S, C), mask=mask), 24)
    for name, B, T, C, nh, causal, lengths, left, p in [
        ("attention_qkv_dropout", 2, 6, 16, 4, 1, None, False, 0.3),
        ("attention_qkv_dropout_masked", 3, 7, 8, 2, 0, [7, 5, 1], True, 0.4),
    ]:
        mask = _pad_mask(B, T, lengths, left) if lengths else torch.ones(B, T, dtype=torch.int32)
        yield name, _fwd_bwd(lambda qkv, mask: _attention_masked(*qkv.chunk(3, dim=-1), mask, nh, causal, p),
                             dict(qkv=rnd(B, T, 3 * C), mask=mask), 25)
