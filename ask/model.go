package ask
