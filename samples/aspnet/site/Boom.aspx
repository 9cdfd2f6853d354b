<%@ Page Language="C#" %>
<script runat="server">
    protected void Page_Load(object sender, EventArgs e)
    {
        throw new InvalidOperationException("Boom.aspx always fails");
    }
</script>
<html><body>never shown</body></html>
