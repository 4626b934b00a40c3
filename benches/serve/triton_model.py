"""A Triton Inference Server model (Python backend) that runs a trtc engine
through trtc's Python package, with the settings `trtc serve` gives a CPU
instance (exact mode, one thread). benches/serve/run.sh serves the same
engines with it and with `trtc serve`, so the two servers' figures differ by
the server alone. Its config.pbtxt names the engine in the parameter
`engine`; with dynamic batching, the requests Triton hands over at once are
stacked along the first axis, run as one batch and split back, as Triton's
own backends do."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils
import trtc


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        engine = trtc.Engine.load(config["parameters"]["engine"]["string_value"])
        self.context = engine.create_context(device="cpu", threads=1, exact=True)
        self.inputs = [b.name for b in engine.inputs]
        self.batching = config.get("max_batch_size", 0) > 0

    def execute(self, requests):
        arrays = [{n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs} for r in requests]
        if self.batching and len(requests) > 1:
            rows = [a[self.inputs[0]].shape[0] for a in arrays]
            outputs = self.context.run({n: np.concatenate([a[n] for a in arrays]) for n in self.inputs})
            bounds = np.cumsum(rows)[:-1]
            split = {n: np.split(v, bounds) for n, v in outputs.items()}
            per_request = [{n: parts[i] for n, parts in split.items()} for i in range(len(requests))]
        else:
            per_request = [self.context.run(a) for a in arrays]
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(n, np.ascontiguousarray(v)) for n, v in out.items()])
            for out in per_request
        ]
