"""Guest images ironpool makes: the tiny test image (a shell script and its guest files) and
Debian images built from Debian's packages (``ironpool image build``)."""
