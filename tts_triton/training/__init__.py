"""Training of the acoustic model and the HiFi-GAN vocoder."""
