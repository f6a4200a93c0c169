"""What the tests share and are not tests themselves: NumPy reference implementations (a llama
forward pass, BERT through transformers, the KV quantizers, the int8 rounding of x), writers of
model files (GGUF and safetensors bytes, the architectures built from transformers) and the
malformed inputs. Tests import them as `from support.<module> import ...` (pytest puts
tests/python on sys.path)."""
