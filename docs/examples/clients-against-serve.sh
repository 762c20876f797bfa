#!/usr/bin/env bash
# Other benchmark clients, unmodified, against `perfkit serve` (profile default), on
# completions and chat, streaming and not. Each client lives in a venv of its own under
# DIR, made beforehand:
#   python3 -m venv DIR/aiperf && DIR/aiperf/bin/pip install aiperf        # 0.13.0
#   python3 -m venv DIR/genai && DIR/genai/bin/pip install genai-bench     # 0.0.5
#   python3.12 -m venv DIR/ip && DIR/ip/bin/pip install inference-perf     # 0.7.0 (Python >= 3.12)
# Usage: bash docs/examples/clients-against-serve.sh DIR   (perfkit on PATH; logs in DIR/out)
set -u
dir=${1:?usage: clients-against-serve.sh DIR}
cd "$dir" && mkdir -p out
port=8741; url=http://127.0.0.1:$port
python -m perfkit.remote.tiny_model "$dir/tok512" --vocab 512 --max-len 512 >/dev/null
perfkit serve --port $port --set engine.cpu_threads=1 > out/serve.log 2>&1 &
server=$!
for _ in $(seq 60); do curl -sf $url/v1/models >/dev/null && break; sleep 1; done
run() { local name=$1; shift; echo "=== $name"; timeout 300 "$@" > "out/$name.log" 2>&1; echo "rc=$?"; }

# AIPerf reads a local tokenizer folder only without HF_HUB_OFFLINE (OAI-3).
for ep in completions chat; do for st in streaming nostream; do
    flag=""; [ $st = streaming ] && flag=--streaming
    run "aiperf-$ep-$st" env -u HF_HUB_OFFLINE aiperf/bin/aiperf profile --model default \
        --url $url --endpoint-type $ep $flag --tokenizer "$dir/tok512" --request-count 8 \
        --concurrency 2 --isl 32 --osl 16 --ui-type none --artifact-dir "out/aip-$ep-$st" \
        --no-server-metrics --no-gpu-telemetry
done; done

# inference-perf: its random data supports completions only; chat takes the mock data.
for st in true false; do for api in completion chat; do
    if [ $api = chat ]; then
        data="  type: mock"
    else
        data="  type: random
  input_distribution: {min: 16, max: 64, mean: 32, std_dev: 8, total_count: 16}
  output_distribution: {min: 8, max: 24, mean: 16, std_dev: 4, total_count: 16}"
    fi
    cat > "out/ip-$api-$st.yml" <<YML
load:
  type: constant
  num_workers: 1
  stages:
  - rate: 2
    duration: 4
api:
  type: $api
  streaming: $st
server:
  type: vllm
  model_name: default
  base_url: $url
  ignore_eos: true
tokenizer:
  pretrained_model_name_or_path: $dir/tok512
data:
$data
storage:
  local_storage:
    path: $dir/out/ip-$api-$st
YML
    HF_HUB_OFFLINE=1 run "ip-$api-$st" ip/bin/inference-perf -c "out/ip-$api-$st.yml"
done; done

HF_HUB_OFFLINE=1 run genai-bench genai/bin/genai-bench benchmark --api-backend openai \
    --api-base $url --api-key none --api-model-name default --model-tokenizer "$dir/tok512" \
    --task text-to-text --traffic-scenario "D(32,16)" --num-concurrency 2 \
    --max-requests-per-run 8 --max-time-per-run 1 --server-engine vLLM \
    --experiment-base-dir out/genai
kill $server; wait $server 2>/dev/null
