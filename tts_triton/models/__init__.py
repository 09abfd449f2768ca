"""The four networks: text encoder, style encoder, attention decoder, HiFi-GAN vocoder."""
