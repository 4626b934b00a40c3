"""A Ray Serve deployment over a trtc engine: N replicas, each with its own
execution context, requests batched by ``@serve.batch``.

    serve run app:app engine=/path/model.engine replicas=2 max_batch_size=8

or ``serve deploy config.yaml`` (see README.md for a cluster of several
machines). HTTP: ``POST /`` with ``{"inputs": {"input": [[...]]}}`` (one
sample, without the batch dimension, or with it for a batch-1 engine);
the answer is ``{"outputs": {"logits": [...]}}``. ``GET /stats`` says which
replica answered and the batch sizes it formed.

An engine built with a profile over its batch (`--min-shapes`/
`--max-shapes`) runs each batch as it comes, cut into chunks of at most its
largest batch. An engine of one shape has a fixed batch: the batch is cut
into chunks of that size, the last chunk padded with zeros. Either way the
outputs are split back per request.
"""

import os
from typing import Any, Dict, List

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

import trtc


@serve.deployment
class TrtcDeployment:
    def __init__(self, engine: str, device: str = "auto", threads: int = 1, max_batch_size: int = 8, batch_wait_timeout_s: float = 0.01):
        self.engine = trtc.Engine.load(engine)
        self.context = self.engine.create_context(device=device, threads=threads)
        self.inputs = self.engine.inputs
        first = self.inputs[0]
        # -1: the batch varies within the engine's profile, up to its max.
        self.batch_varies = bool(first.shape) and first.shape[0] == -1
        self.engine_batch = first.max_shape[0] if first.shape else 1
        self.batch_sizes: List[int] = []
        self.infer.set_max_batch_size(max_batch_size)
        self.infer.set_batch_wait_timeout_s(batch_wait_timeout_s)

    def sample(self, request: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """One request's inputs, each with the engine's per-sample shape."""
        given = request.get("inputs")
        if not isinstance(given, dict):
            raise ValueError('expected {"inputs": {name: array}}')
        out = {}
        for b in self.inputs:
            if b.name not in given:
                raise ValueError(f"missing input '{b.name}'")
            x = np.asarray(given[b.name], dtype=b.dtype)
            per_sample = b.max_shape[1:]
            if x.shape == (1,) + per_sample:
                x = x[0]
            if x.shape != per_sample:
                raise ValueError(f"input '{b.name}' must have shape {list(per_sample)} (one sample), got {list(x.shape)}")
            out[b.name] = x
        return out

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def infer(self, samples: List[Dict[str, np.ndarray]]) -> List[Dict[str, list]]:
        self.batch_sizes.append(len(samples))
        results: List[Dict[str, list]] = []
        n = self.engine_batch
        for start in range(0, len(samples), n):
            chunk = samples[start : start + n]
            feeds = {}
            for b in self.inputs:
                stacked = np.stack([s[b.name] for s in chunk])
                if len(chunk) < n and not self.batch_varies:
                    pad = np.zeros((n - len(chunk),) + stacked.shape[1:], dtype=stacked.dtype)
                    stacked = np.concatenate([stacked, pad])
                feeds[b.name] = stacked
            outputs = self.context.run(feeds)
            for i in range(len(chunk)):
                results.append({name: value[i].tolist() for name, value in outputs.items()})
        return results

    async def __call__(self, request: Request):
        if request.url.path.rstrip("/").endswith("/stats"):
            return {"pid": os.getpid(), "batch_sizes": self.batch_sizes}
        try:
            sample = self.sample(await request.json())
        except (ValueError, TypeError) as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        return {"outputs": await self.infer(sample)}


def app_builder(args: Dict[str, str]) -> serve.Application:
    """``serve run app:app_builder engine=... replicas=...``; also the
    import path of config.yaml."""
    replicas = int(args.get("replicas", 2))
    gpus = float(args.get("gpus_per_replica", 0))
    options = {"num_cpus": float(args.get("cpus_per_replica", 1))}
    if gpus:
        options["num_gpus"] = gpus
    deployment = TrtcDeployment.options(num_replicas=replicas, ray_actor_options=options)
    return deployment.bind(
        args["engine"],
        device=args.get("device", "auto"),
        threads=int(args.get("threads", 1)),
        max_batch_size=int(args.get("max_batch_size", 8)),
        batch_wait_timeout_s=float(args.get("batch_wait_timeout_s", 0.01)),
    )


app = app_builder
