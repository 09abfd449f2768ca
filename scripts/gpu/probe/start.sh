# start.sh REPO PORTBASE [extra tritonserver args]: start Triton in the background and wait until ready.
repo=$1; base=$2; shift 2
"$TRITONSERVER" --model-repository="$repo" --backend-directory="$TRITON_BACKENDS" \
  --http-port=$base --grpc-port=$((base+1)) --metrics-port=$((base+2)) --exit-timeout-secs=10 \
  --backend-config=python,shm-default-byte-size=16777216 "$@" > "$OUT/triton-$base.log" 2>&1 &
echo $! > /tmp/triton-$base.pid
t0=$(date +%s.%N)
for i in $(seq 1 600); do
  if curl -sf localhost:$base/v2/health/ready >/dev/null; then
    echo "triton ready on $base after $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"; break; fi
  if ! kill -0 $(cat /tmp/triton-$base.pid) 2>/dev/null; then echo "triton died"; tail -40 "$OUT/triton-$base.log"; break; fi
  sleep 0.5
done
